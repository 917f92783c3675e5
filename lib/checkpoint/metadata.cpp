#include "checkpoint/metadata.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

#include "checkpoint/durable_file.h"
#include "util/error.h"

namespace trainctl::checkpoint {

using nlohmann::json;

json to_json(const TensorRecord& t) {
  return {{"name", t.name},
          {"global_shape", t.shard.global_shape},
          {"local_shape", t.shard.local_shape()},
          {"dim", t.shard.dim},
          {"blocks", t.shard.blocks},
          {"index", t.shard.index},
          {"count", t.shard.count}};
}

json to_json(const FileRecord& f) {
  json tensors = json::array();
  for (const TensorRecord& t : f.tensors) tensors.push_back(to_json(t));
  return {{"name", f.name},
          {"rank", f.rank},
          {"bytes", f.bytes},
          {"checksum", f.checksum},
          {"tensors", std::move(tensors)}};
}

json to_json(const CheckpointMetadata& m) {
  json files = json::array();
  for (const FileRecord& f : m.files) files.push_back(to_json(f));
  return {
      {"format_version", m.format_version},
      {"producer", m.producer},
      {"step", m.step},
      {"layout",
       {{"dp", m.layout.dp},
        {"tp", m.layout.tp},
        {"pp", m.layout.pp},
        {"virtual_stages", m.layout.virtual_stages},
        {"zero", m.layout.zero}}},
      {"model",
       {{"vocab_size", m.model.vocab_size},
        {"max_seq_len", m.model.max_seq_len},
        {"n_layer", m.model.n_layer},
        {"n_head", m.model.n_head},
        {"d_model", m.model.d_model}}},
      {"data", {{"samples_consumed", m.data.samples_consumed}, {"next_step", m.data.next_step}}},
      {"optimizer_step", m.optimizer_step},
      {"rng", m.rng},
      {"extra", m.extra},
      {"files", std::move(files)}};
}

namespace {

TensorRecord tensor_record_from_json(const json& j, const std::string& where) {
  TensorRecord t;
  t.name = j.at("name").get<std::string>();
  t.shard.global_shape = j.at("global_shape").get<Shape>();
  t.shard.dim = j.at("dim").get<int>();
  t.shard.blocks = j.at("blocks").get<int>();
  t.shard.index = j.at("index").get<int>();
  t.shard.count = j.at("count").get<int>();
  const model::TensorShard& s = t.shard;
  const bool dim_ok = s.dim >= -1 && s.dim < static_cast<int>(s.global_shape.size());
  bool divisible = true;
  if (dim_ok && s.split()) {
    const int64_t extent = s.global_shape[static_cast<size_t>(s.dim)];
    divisible = s.blocks >= 1 && extent % s.blocks == 0 && (extent / s.blocks) % s.count == 0;
  }
  if (!dim_ok || s.count < 1 || s.index < 0 || s.index >= s.count || !divisible) {
    throw std::runtime_error(where + ": " + t.name + " has an impossible shard description");
  }
  if (j.contains("local_shape") && j.at("local_shape").get<Shape>() != s.local_shape()) {
    throw std::runtime_error(where + ": " + t.name + "'s local_shape does not match its shard");
  }
  return t;
}

}  // namespace

FileRecord file_record_from_json(const json& j, const std::string& where) {
  try {
    FileRecord f;
    f.name = j.at("name").get<std::string>();
    f.rank = j.at("rank").get<int>();
    f.bytes = j.at("bytes").get<uint64_t>();
    f.checksum = j.at("checksum").get<std::string>();
    if (f.name.empty() || f.name.find('/') != std::string::npos || f.name[0] == '.') {
      throw std::runtime_error("bad file name \"" + f.name + "\"");
    }
    for (const json& t : j.at("tensors")) f.tensors.push_back(tensor_record_from_json(t, where));
    return f;
  } catch (const json::exception& e) {
    throw std::runtime_error(where + ": bad file entry: " + e.what());
  }
}

CheckpointMetadata metadata_from_json(const json& j, const std::string& where) {
  try {
    CheckpointMetadata m;
    m.format_version = j.at("format_version").get<int>();
    if (m.format_version > kFormatVersion) {
      throw std::runtime_error("format version " + std::to_string(m.format_version) +
                               " is newer than this trainctl reads (" +
                               std::to_string(kFormatVersion) + "): upgrade trainctl");
    }
    m.producer = j.value("producer", "");
    m.step = j.at("step").get<int64_t>();
    const json& l = j.at("layout");
    m.layout = {l.at("dp").get<int>(), l.at("tp").get<int>(), l.at("pp").get<int>(),
                l.at("virtual_stages").get<int>(), l.at("zero").get<int>()};
    const json& c = j.at("model");
    m.model.vocab_size = c.at("vocab_size").get<int>();
    m.model.max_seq_len = c.at("max_seq_len").get<int>();
    m.model.n_layer = c.at("n_layer").get<int>();
    m.model.n_head = c.at("n_head").get<int>();
    m.model.d_model = c.at("d_model").get<int>();
    m.data.samples_consumed = j.at("data").at("samples_consumed").get<int64_t>();
    m.data.next_step = j.at("data").at("next_step").get<int64_t>();
    m.optimizer_step = j.at("optimizer_step").get<int64_t>();
    m.rng = j.value("rng", json());
    m.extra = j.value("extra", json::object());
    for (const json& f : j.at("files")) m.files.push_back(file_record_from_json(f, where));
    return m;
  } catch (const json::exception& e) {
    throw std::runtime_error(where + ": " + e.what());
  }
}

void write_metadata(const std::filesystem::path& dir, const CheckpointMetadata& m) {
  write_file_atomically(dir / kMetadataFile, to_json(m).dump(2) + "\n");
}

CheckpointMetadata read_metadata(const std::filesystem::path& dir) {
  const std::filesystem::path path = dir / kMetadataFile;
  std::ifstream in(path);
  if (!in) {
    throw InputError(dir.string() + " is not a complete checkpoint: it has no " + kMetadataFile);
  }
  std::stringstream text;
  text << in.rdbuf();
  try {
    return metadata_from_json(json::parse(text.str()), path.string());
  } catch (const std::exception& e) {
    throw InputError(std::string("cannot use checkpoint ") + dir.string() + ": " + e.what());
  }
}

}  // namespace trainctl::checkpoint
