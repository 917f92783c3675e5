#include "checkpoint/metadata.h"

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <set>
#include <sstream>
#include <system_error>

#include "checkpoint/durable_file.h"
#include "checkpoint/errors.h"
#include "checkpoint/json_field.h"
#include "checkpoint/metadata_checksum.h"
#include "util/error.h"

namespace trainctl::checkpoint {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// The job spec's limits (config/sections.cpp, config/validate.cpp): a checkpoint written by
// trainctl never exceeds them, so a value beyond them was not written by it.
constexpr int64_t kMaxWorkers = int64_t{1} << 20;
constexpr int64_t kMaxDim = int64_t{1} << 32;       // one dimension of a tensor
constexpr int64_t kMaxElements = int64_t{1} << 40;  // one tensor: 4 TiB of fp32
constexpr int64_t kMaxGlobalBatch = 2147483647;     // training.global_batch_size is an int

std::string shard_problem(const model::TensorShard& s) {
  if (s.dim < -1 || s.dim >= static_cast<int>(s.global_shape.size())) {
    return "split dimension " + std::to_string(s.dim) + " of a " +
           std::to_string(s.global_shape.size()) + "-d tensor";
  }
  if (s.index >= s.count) {
    return "piece " + std::to_string(s.index) + " of " + std::to_string(s.count);
  }
  if (s.split()) {
    const int64_t extent = s.global_shape[static_cast<size_t>(s.dim)];
    if (extent % s.blocks != 0 || (extent / s.blocks) % s.count != 0) {
      return "dimension " + std::to_string(s.dim) + " of " + std::to_string(extent) + " cut into " +
             std::to_string(s.blocks) + " blocks of " + std::to_string(s.count) + " pieces";
    }
  }
  return {};
}

TensorRecord tensor_record_from_json(const json& j, const JsonPlace& at) {
  TensorRecord t;
  t.name = json_string(j, "name", at);
  if (t.name.empty()) bad_field(at, at.field("name"), "is empty");
  const json& shape = json_array(j, "global_shape", at);
  if (shape.size() > 8) bad_field(at, at.field("global_shape"), "has more than 8 dimensions");
  int64_t elements = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    const int64_t extent = json_int_value(
        shape[d], at.field("global_shape") + "[" + std::to_string(d) + "]", 1, kMaxDim, at);
    if (elements > kMaxElements / extent) {
      bad_field(at, at.field("global_shape"), "holds more than 2^40 elements");
    }
    elements *= extent;
    t.shard.global_shape.push_back(extent);
  }
  t.shard.dim = static_cast<int>(json_int(j, "dim", -1, 7, at));
  t.shard.blocks = static_cast<int>(json_int(j, "blocks", 1, kMaxWorkers, at));
  t.shard.count = static_cast<int>(json_int(j, "count", 1, kMaxWorkers, at));
  t.shard.index = static_cast<int>(json_int(j, "index", 0, kMaxWorkers - 1, at));
  const std::string problem = shard_problem(t.shard);
  if (!problem.empty()) {
    bad_field(at, at.prefix.substr(0, at.prefix.size() - 1),
              "(" + t.name + ") describes an impossible shard: " + problem);
  }
  if (j.contains("local_shape") && j.at("local_shape") != json(t.shard.local_shape())) {
    bad_field(at, at.field("local_shape"), "does not match the shard of " + t.name);
  }
  return t;
}

FileRecord file_record_at(const json& j, const JsonPlace& at) {
  FileRecord f;
  f.name = json_string(j, "name", at);
  if (f.name.empty() || f.name.find('/') != std::string::npos || f.name[0] == '.') {
    bad_field(at, at.field("name"), "is \"" + f.name + "\", not a file name in the checkpoint");
  }
  f.rank = static_cast<int>(json_int(j, "rank", 0, kMaxWorkers - 1, at));
  f.bytes = static_cast<uint64_t>(json_int(j, "bytes", 8, int64_t{1} << 62, at));
  f.checksum = json_string(j, "checksum", at);
  const bool hex = f.checksum.size() == 15 && f.checksum.rfind("crc32c:", 0) == 0 &&
                   std::all_of(f.checksum.begin() + 7, f.checksum.end(), [](char c) {
                     return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
                   });
  if (!hex) bad_field(at, at.field("checksum"), "is not \"crc32c:\" and 8 hex digits");
  const json& tensors = json_array(j, "tensors", at);
  std::set<std::string> names;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const JsonPlace t_at = at.in("tensors[" + std::to_string(i) + "]");
    f.tensors.push_back(tensor_record_from_json(tensors[i], t_at));
    if (!names.insert(f.tensors.back().name).second) {
      bad_field(t_at, t_at.field("name"), "names " + f.tensors.back().name + " a second time");
    }
  }
  return f;
}

void check_checksum(const json& j, const JsonPlace& top) {
  const std::string recorded = json_string(j, kMetadataChecksumKey, top);
  const std::string actual = metadata_checksum(j);
  if (recorded != actual) {
    throw CheckpointCorrupt(top.file + ": metadata.json was modified after it was written (" +
                            kMetadataChecksumKey + " is " + recorded + ", its content gives " +
                            actual + "): resume from another checkpoint");
  }
}

void read_layout(const json& j, const JsonPlace& top, CheckpointMetadata& m) {
  const JsonPlace at = top.in("layout");
  const json& l = json_member(j, "layout", top);
  m.layout.dp = static_cast<int>(json_int(l, "dp", 1, kMaxWorkers, at));
  m.layout.tp = static_cast<int>(json_int(l, "tp", 1, kMaxWorkers, at));
  m.layout.pp = static_cast<int>(json_int(l, "pp", 1, kMaxWorkers, at));
  m.layout.virtual_stages = static_cast<int>(json_int(l, "virtual_stages", 1, 64, at));
  m.layout.zero = static_cast<int>(json_int(l, "zero", 0, 3, at));
  // parallel.ep, recorded only when > 1 (checkpoints from before it have none).
  if (l.contains("ep")) m.layout.ep = static_cast<int>(json_int(l, "ep", 1, kMaxWorkers, at));
  // Context parallelism (written when cp > 1): CP ranks hold the same parameters; only CP
  // rank 0 of each replica writes them, the others write empty shards.
  m.layout.cp = l.contains("cp") ? static_cast<int>(json_int(l, "cp", 1, kMaxWorkers, at)) : 1;
  if (int64_t{m.layout.dp} * m.layout.tp * m.layout.pp * m.layout.cp > kMaxWorkers) {
    bad_field(at, at.field("dp"), "x tp x pp is more than 1048576 workers");
  }
}

// model.moe: written only for mixture-of-experts models (model/moe/).
void read_moe(const json& c, const JsonPlace& at, model::ModelConfig& m) {
  if (!c.contains("moe")) return;
  const JsonPlace e = at.in("moe");
  const json& j = json_member(c, "moe", at);
  m.moe.num_experts = static_cast<int>(json_int(j, "num_experts", 1, 1 << 16, e));
  m.moe.top_k = static_cast<int>(json_int(j, "top_k", 1, m.moe.num_experts, e));
  m.moe.expert_ffn_hidden = static_cast<int>(json_int(j, "expert_ffn_hidden", 1, 1 << 20, e));
  m.moe.shared_experts = static_cast<int>(json_int(j, "shared_experts", 0, 1 << 10, e));
  m.moe.layers_every = static_cast<int>(json_int(j, "layers_every", 1, 1 << 20, e));
  m.moe.layers_from = static_cast<int>(json_int(j, "layers_from", 0, 1 << 20, e));
  const std::string score = json_string(j, "score", e);
  if (score != "softmax" && score != "sigmoid") {
    bad_field(e, e.field("score"), "is neither softmax nor sigmoid");
  }
  m.moe.score = score == "sigmoid" ? model::MoeScore::sigmoid : model::MoeScore::softmax;
  for (const char* key : {"aux_loss_coef", "capacity_factor"}) {
    const json& v = json_member(j, key, e);
    if (!v.is_number() || !(v.get<double>() >= 0)) {
      bad_field(e, e.field(key), "must be a number >= 0");
    }
  }
  m.moe.aux_loss_coef = j.at("aux_loss_coef").get<float>();
  m.moe.capacity_factor = j.at("capacity_factor").get<float>();
  // balance: bias (absent: no expert bias).
  if (j.contains("bias_update_rate")) {
    const json& v = j.at("bias_update_rate");
    if (!v.is_number() || !(v.get<double>() >= 0)) {
      bad_field(e, e.field("bias_update_rate"), "must be a number >= 0");
    }
    m.moe.bias_update_rate = v.get<float>();
  }
}

json moe_json(const model::MoeConfig& e) {
  json j = {{"num_experts", e.num_experts},
            {"top_k", e.top_k},
            {"expert_ffn_hidden", e.expert_ffn_hidden},
            {"shared_experts", e.shared_experts},
            {"score", e.score == model::MoeScore::sigmoid ? "sigmoid" : "softmax"},
            {"aux_loss_coef", e.aux_loss_coef},
            {"capacity_factor", e.capacity_factor},
            {"layers_every", e.layers_every},
            {"layers_from", e.layers_from}};
  if (e.expert_bias()) j["bias_update_rate"] = e.bias_update_rate;
  return j;
}

void read_model(const json& j, const JsonPlace& top, CheckpointMetadata& m) {
  const JsonPlace at = top.in("model");
  const json& c = json_member(j, "model", top);
  m.model.vocab_size = static_cast<int>(json_int(c, "vocab_size", 2, 1 << 24, at));
  m.model.max_seq_len = static_cast<int>(json_int(c, "max_seq_len", 1, 1 << 20, at));
  m.model.n_layer = static_cast<int>(json_int(c, "n_layer", 1, 1024, at));
  m.model.n_head = static_cast<int>(json_int(c, "n_head", 1, 1024, at));
  m.model.d_model = static_cast<int>(json_int(c, "d_model", 1, 1 << 16, at));
  if (m.model.d_model % m.model.n_head != 0) {
    bad_field(at, at.field("n_head"), "does not divide d_model");
  }
  read_moe(c, at, m.model);
  // Written only for the Llama family: GPT checkpoints keep their metadata as it was.
  if (!c.contains("family")) return;
  const std::string family = json_string(c, "family", at);
  if (family == "gpt") return;
  if (family != "llama") bad_field(at, at.field("family"), "is neither gpt nor llama");
  m.model.family = model::Family::llama;
  m.model.n_kv_head = static_cast<int>(json_int(c, "n_kv_head", 1, 1024, at));
  m.model.ffn_hidden = static_cast<int>(json_int(c, "ffn_hidden", 1, 1 << 20, at));
  if (m.model.n_head % m.model.n_kv_head != 0) {
    bad_field(at, at.field("n_kv_head"), "does not divide n_head");
  }
  const json& eps = json_member(c, "norm_eps", at);
  const json& theta = json_member(c, "rope_theta", at);
  const json& tie = json_member(c, "tie_embeddings", at);
  if (!eps.is_number() || !(eps.get<double>() > 0 && eps.get<double>() < 1)) {
    bad_field(at, at.field("norm_eps"), "must be a number in (0, 1)");
  }
  if (!theta.is_number() || !(theta.get<double>() >= 1)) {
    bad_field(at, at.field("rope_theta"), "must be a number >= 1");
  }
  if (!tie.is_boolean()) bad_field(at, at.field("tie_embeddings"), "must be true or false");
  m.model.norm_eps = eps.get<float>();
  m.model.rope_theta = theta.get<float>();
  m.model.tie_embeddings = tie.get<bool>();
}

json model_json(const model::ModelConfig& c) {
  json j = {{"vocab_size", c.vocab_size},
            {"max_seq_len", c.max_seq_len},
            {"n_layer", c.n_layer},
            {"n_head", c.n_head},
            {"d_model", c.d_model}};
  if (c.llama()) {
    j["family"] = "llama";
    j["n_kv_head"] = c.kv_heads();
    j["ffn_hidden"] = c.mlp_hidden();
    j["norm_eps"] = c.norm_eps;
    j["rope_theta"] = c.rope_theta;
    j["tie_embeddings"] = c.tie_embeddings;
  }
  if (c.moe.enabled()) j["moe"] = moe_json(c.moe);
  return j;
}

void read_files(const json& j, const JsonPlace& top, CheckpointMetadata& m) {
  const json& files = json_array(j, "files", top);
  std::set<std::string> names;
  std::set<int> ranks;
  size_t tensors = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    const JsonPlace at = top.in("files[" + std::to_string(i) + "]");
    m.files.push_back(file_record_at(files[i], at));
    const FileRecord& f = m.files.back();
    if (!names.insert(f.name).second) bad_field(at, at.field("name"), "lists a file twice");
    if (!ranks.insert(f.rank).second) bad_field(at, at.field("rank"), "lists a rank twice");
    tensors += f.tensors.size();
  }
  if (tensors == 0) {
    throw CheckpointCorrupt(top.file + ": the checkpoint holds no tensors (\"files\" lists " +
                            std::to_string(files.size()) +
                            " files and no tensor); the file was edited or damaged: resume "
                            "from another checkpoint");
  }
}

json data_json(const DataPosition& d) {
  json out = {{"samples_consumed", d.samples_consumed}, {"next_step", d.next_step}};
  if (d.sources.empty()) return out;
  json sources = json::array();
  for (const SourcePosition& s : d.sources) {
    sources.push_back({{"name", s.name},
                       {"samples_consumed", s.samples_consumed},
                       {"tokens_consumed", s.tokens_consumed},
                       {"epoch", s.epoch}});
  }
  out["sources"] = std::move(sources);
  return out;
}

// data.sources: one position per blend source, whose samples add up to the stream's.
std::vector<SourcePosition> read_sources(const json& data, const JsonPlace& at,
                                         const DataPosition& d) {
  const json& list = data.at("sources");
  if (!list.is_array()) bad_field(at, "sources", "is not a JSON array");
  std::vector<SourcePosition> out;
  int64_t total = 0;
  for (size_t i = 0; i < list.size(); ++i) {
    const JsonPlace item = at.in("sources[" + std::to_string(i) + "]");
    if (!list[i].is_object()) bad_field(at, "sources", "holds an item that is not an object");
    SourcePosition s;
    s.name = json_string(list[i], "name", item);
    s.samples_consumed = json_int(list[i], "samples_consumed", 0, d.samples_consumed, item);
    s.tokens_consumed = json_int(list[i], "tokens_consumed", 0, INT64_MAX, item);
    s.epoch = json_int(list[i], "epoch", 0, INT64_MAX, item);
    total += s.samples_consumed;
    out.push_back(std::move(s));
  }
  if (total != d.samples_consumed) {
    bad_field(at, "sources",
              "draw " + std::to_string(total) + " samples in all, not the " +
                  std::to_string(d.samples_consumed) + " of samples_consumed");
  }
  return out;
}

}  // namespace

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
  json layout = {{"dp", m.layout.dp},
                 {"tp", m.layout.tp},
                 {"pp", m.layout.pp},
                 {"virtual_stages", m.layout.virtual_stages},
                 {"zero", m.layout.zero}};
  if (m.layout.cp != 1) layout["cp"] = m.layout.cp;
  json doc = {{"format_version", m.format_version},
              {"producer", m.producer},
              {"step", m.step},
              {"layout", std::move(layout)},
              {"model", model_json(m.model)},
              {"data", data_json(m.data)},
              {"optimizer_step", m.optimizer_step},
              {"rng", m.rng},
              {"extra", m.extra},
              {"files", std::move(files)}};
  if (m.layout.ep != 1) doc["layout"]["ep"] = m.layout.ep;
  if (metadata_is_protected(m)) doc[kMetadataChecksumKey] = metadata_checksum(doc);
  return doc;
}

FileRecord file_record_from_json(const json& j, const std::string& where) {
  return file_record_at(j, {where, ""});
}

CheckpointMetadata metadata_from_json(const json& j, const std::string& where) {
  const JsonPlace top{where, ""};
  CheckpointMetadata m;
  m.format_version = static_cast<int>(json_int(j, "format_version", 1, 2147483647, top));
  if (m.format_version > kFormatVersion) {
    throw InputError(where + ": format version " + std::to_string(m.format_version) +
                     " is newer than this trainctl reads (" + std::to_string(kFormatVersion) +
                     "): upgrade trainctl");
  }
  // First: an edited file is reported as edited, not by the first value that looks odd.
  if (metadata_is_protected(m)) check_checksum(j, top);
  if (j.contains("producer")) m.producer = json_string(j, "producer", top);
  m.step = json_int(j, "step", 0, kMaxCheckpointStep, top);  // 0: imported (ckpt import)
  read_layout(j, top, m);
  read_model(j, top, m);
  const JsonPlace data_at = top.in("data");
  const json& data = json_member(j, "data", top);
  // Every step draws at least one sample and at most a global batch of them.
  m.data.samples_consumed =
      json_int(data, "samples_consumed", m.step, m.step * kMaxGlobalBatch, data_at);
  // The loader continues after `step`; a different next_step could not be honoured.
  m.data.next_step = json_int(data, "next_step", m.step, m.step, data_at);
  if (data.contains("sources")) m.data.sources = read_sources(data, data_at, m.data);
  m.optimizer_step = json_int(j, "optimizer_step", 0, m.step, top);
  m.rng = j.value("rng", json());
  m.extra = j.value("extra", json::object());
  if (!m.extra.is_object()) bad_field(top, "extra", "is not a JSON object");
  read_files(j, top, m);
  return m;
}

void write_metadata(const fs::path& dir, const CheckpointMetadata& m) {
  write_file_atomically(dir / kMetadataFile, to_json(m).dump(2) + "\n");
}

namespace {

// The N of a directory named step_<N> (as commit.h names them), else -1.
int64_t step_of_dir_name(const fs::path& dir) {
  const std::string name = dir.filename().string();
  const std::string digits = name.rfind("step_", 0) == 0 ? name.substr(5) : "";
  if (digits.empty() || digits.size() > 18 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return -1;
  }
  return std::stoll(digits);
}

}  // namespace

CheckpointMetadata read_metadata(const fs::path& dir) {
  const fs::path path = dir / kMetadataFile;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (st.type() == fs::file_type::not_found) {
    throw CheckpointCorrupt(dir.string() + " is not a complete checkpoint: it has no " +
                            kMetadataFile);
  }
  if (ec) throw CheckpointCorrupt("cannot read " + path.string() + ": " + ec.message());
  if (st.type() != fs::file_type::regular) {
    throw CheckpointCorrupt(path.string() + " is not a regular file");
  }
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) throw CheckpointCorrupt("cannot read " + path.string());
  json doc;
  try {
    doc = json::parse(text.str());
  } catch (const json::exception& e) {
    throw CheckpointCorrupt("cannot use checkpoint " + dir.string() + ": " + kMetadataFile +
                            " is not valid JSON (" + e.what() +
                            "); the file is damaged: resume from another checkpoint");
  }
  CheckpointMetadata m = metadata_from_json(doc, path.string());
  const int64_t named = step_of_dir_name(dir);
  if (named >= 0 && named != m.step) {
    bad_field({path.string(), ""}, "step",
              "is " + std::to_string(m.step) + " but the directory is " + dir.filename().string());
  }
  return m;
}

}  // namespace trainctl::checkpoint
