#include "checkpoint/completeness.h"

#include <map>
#include <set>

#include "checkpoint/reader.h"
#include "checkpoint/shard_writer.h"
#include "model/shard.h"

namespace trainctl::checkpoint {

namespace fs = std::filesystem;

namespace {

std::string describe(const model::ModelConfig& c) {
  return std::string(model::to_string(c.family)) + ", vocab_size " + std::to_string(c.vocab_size) +
         ", max_seq_len " + std::to_string(c.max_seq_len) + ", n_layer " +
         std::to_string(c.n_layer) + ", n_head " + std::to_string(c.n_head) + ", d_model " +
         std::to_string(c.d_model);
}

std::string ranks_text(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size() && i < 8; ++i) {
    out += (i ? ", " : "") + std::to_string(ranks[i]);
  }
  if (ranks.size() > 8) out += ", ... (" + std::to_string(ranks.size()) + " in all)";
  return out;
}

}  // namespace

std::vector<std::string> file_list_problems(const CheckpointMetadata& m, const fs::path& dir) {
  const int world = m.layout.world_size();
  std::set<int> seen;
  std::vector<int> foreign;
  for (const FileRecord& f : m.files) {
    if (f.rank >= world) foreign.push_back(f.rank);
    seen.insert(f.rank);
  }
  std::vector<int> missing;
  for (int r = 0; r < world; ++r) {
    if (!seen.count(r)) missing.push_back(r);
  }
  const std::string layout = "dp " + std::to_string(m.layout.dp) + " x tp " +
                             std::to_string(m.layout.tp) + " x pp " + std::to_string(m.layout.pp) +
                             (m.layout.cp > 1 ? " x cp " + std::to_string(m.layout.cp) : "");
  std::vector<std::string> out;
  if (!missing.empty()) {
    out.push_back("checkpoint " + dir.string() +
                  " is incomplete: metadata.json lists no file from rank(s) " +
                  ranks_text(missing) + " of the " + std::to_string(world) +
                  " ranks of the layout that wrote it (" + layout + ")");
  }
  if (!foreign.empty()) {
    out.push_back("checkpoint " + dir.string() +
                  " is inconsistent: metadata.json lists files from rank(s) " +
                  ranks_text(foreign) + " but the layout that wrote it (" + layout + ") has " +
                  std::to_string(world) + " ranks");
  }
  return out;
}

std::vector<std::string> model_tensor_problems(const CheckpointReader& reader) {
  const CheckpointMetadata& m = reader.metadata();
  const std::string where = "checkpoint " + reader.dir().string();
  const std::string model = " (its model: " + describe(m.model) + ")";
  std::map<std::string, Shape> expected, buffers;
  const std::string gate = ".gate.weight";
  for (const model::ParamSpec& p :
       model::gpt_param_specs(m.model, model::GptShardSpec::whole(m.model))) {
    if (!p.tied_copy) expected[p.name] = p.shard.global_shape;
    // balance: bias: each MoE router's expert bias, a buffer beside its gate (no optimizer
    // state; train/checkpointing.cpp).
    const size_t n = p.name.size();
    if (m.model.moe.expert_bias() && n > gate.size() &&
        p.name.compare(n - gate.size(), gate.size(), gate) == 0) {
      buffers[p.name.substr(0, n - std::string("weight").size()) + "e_score_correction_bias"] = {
          m.model.moe.num_experts};
    }
  }
  // The optimizer states present (AdamW: exp_avg, exp_avg_sq; SGD: momentum_buffer).
  std::set<std::string> states;
  for (const std::string& name : reader.tensor_names()) {
    if (!is_optimizer_tensor(name)) continue;
    const std::string rest = name.substr(std::string(kOptimizerPrefix).size());
    states.insert(rest.substr(0, rest.find('.')));
  }
  std::vector<std::string> out;
  auto check = [&](const std::string& name, const Shape& shape) {
    if (!reader.contains(name)) {
      out.push_back(where + " is incomplete: it holds no " + name + model);
    } else if (reader.global_shape(name) != shape) {
      out.push_back(where + " holds " + name + " as " + shape_string(reader.global_shape(name)) +
                    " but its model has it as " + shape_string(shape) + model);
    }
  };
  for (const auto& [name, shape] : expected) {
    check(name, shape);
    for (const std::string& state : states) check(optimizer_tensor_name(state, name), shape);
  }
  for (const auto& [name, shape] : buffers) check(name, shape);
  for (const std::string& name : reader.tensor_names()) {
    std::string parameter = name;
    if (is_optimizer_tensor(name)) {
      const std::string rest = name.substr(std::string(kOptimizerPrefix).size());
      parameter = rest.find('.') == std::string::npos ? "" : rest.substr(rest.find('.') + 1);
    }
    if (!expected.count(parameter) && !buffers.count(name)) {
      out.push_back(where + " holds " + name + ", which is not part of its model" + model);
    }
  }
  return out;
}

}  // namespace trainctl::checkpoint
