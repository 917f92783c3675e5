#include "checkpoint/shard_writer.h"

#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include "checkpoint/durable_file.h"
#include "checkpoint/safetensors.h"

namespace trainctl::checkpoint {

std::string optimizer_tensor_name(const std::string& state, const std::string& parameter) {
  return kOptimizerPrefix + state + "." + parameter;
}

bool is_optimizer_tensor(const std::string& name) { return name.rfind(kOptimizerPrefix, 0) == 0; }

namespace {
std::string rank_stem(int rank) {
  char text[32];
  std::snprintf(text, sizeof text, "rank_%05d", rank);
  return text;
}
}  // namespace

std::string shard_file_name(int rank) { return rank_stem(rank) + ".safetensors"; }
std::string shard_record_name(int rank) { return rank_stem(rank) + ".json"; }

FileRecord write_shard(const std::filesystem::path& dir, int rank,
                       const std::vector<ShardTensor>& tensors) {
  FileRecord record;
  record.name = shard_file_name(rank);
  record.rank = rank;
  std::vector<SafetensorsEntry> entries;
  nlohmann::json shards = nlohmann::json::array();
  std::set<std::string> seen;
  for (const ShardTensor& t : tensors) {
    if (!seen.insert(t.name).second) {
      throw std::invalid_argument("write_shard: tensor " + t.name + " given twice");
    }
    if (t.data == nullptr && numel_of(t.shard.local_shape()) > 0) {
      throw std::invalid_argument("write_shard: tensor " + t.name + " has no data");
    }
    record.tensors.push_back({t.name, t.shard});
    entries.push_back({t.name, "F32", t.shard.local_shape(), 0, 0});
    shards.push_back(to_json(record.tensors.back()));
  }
  const std::string header =
      encode_safetensors_header(entries, {{"format", "trainctl-checkpoint-shard"},
                                          {"rank", std::to_string(rank)},
                                          {"trainctl.shards", shards.dump()}});
  DurableFile file(dir / record.name);
  file.write(header.data(), header.size());
  for (const ShardTensor& t : tensors) {
    file.write(t.data, static_cast<size_t>(numel_of(t.shard.local_shape())) * sizeof(float));
  }
  file.finish();
  record.bytes = file.bytes();
  record.checksum = checksum_text(file.crc());
  write_file_atomically(dir / shard_record_name(rank), to_json(record).dump() + "\n");
  return record;
}

std::vector<FileRecord> collect_shard_records(const std::filesystem::path& dir, int world_size) {
  std::vector<FileRecord> out;
  std::string missing;
  for (int r = 0; r < world_size; ++r) {
    const std::filesystem::path path = dir / shard_record_name(r);
    std::ifstream in(path);
    if (!in) {
      missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      continue;
    }
    std::stringstream text;
    text << in.rdbuf();
    try {
      out.push_back(file_record_from_json(nlohmann::json::parse(text.str()), path.string()));
    } catch (const nlohmann::json::exception& e) {
      throw std::runtime_error(path.string() + ": " + e.what());
    }
  }
  if (!missing.empty()) {
    throw std::runtime_error("checkpoint in " + dir.string() +
                             " is incomplete: no shard from rank(s) " + missing);
  }
  return out;
}

}  // namespace trainctl::checkpoint
