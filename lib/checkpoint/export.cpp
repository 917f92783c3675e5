#include "checkpoint/export.h"

#include <algorithm>
#include <vector>

#include "checkpoint/durable_file.h"
#include "checkpoint/errors.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/shard_writer.h"

namespace trainctl::checkpoint {

std::map<std::string, std::string> nanogpt_metadata(const model::ModelConfig& c,
                                                    const std::string& job) {
  if (c.llama()) {
    // Llama's dimensions, under Hugging Face LlamaConfig's names.
    std::map<std::string, std::string> m = {
        {"format", "pt"},
        {"producer", "trainctl " TRAINCTL_VERSION},
        {"architecture", "llama"},
        {"vocab_size", std::to_string(c.vocab_size)},
        {"max_position_embeddings", std::to_string(c.max_seq_len)},
        {"num_hidden_layers", std::to_string(c.n_layer)},
        {"num_attention_heads", std::to_string(c.n_head)},
        {"num_key_value_heads", std::to_string(c.kv_heads())},
        {"hidden_size", std::to_string(c.d_model)},
        {"intermediate_size", std::to_string(c.mlp_hidden())},
        {"rms_norm_eps", std::to_string(c.norm_eps)},
        {"rope_theta", std::to_string(c.rope_theta)},
        {"tie_word_embeddings", c.tie_embeddings ? "true" : "false"}};
    if (!job.empty()) m["job"] = job;
    return m;
  }
  std::map<std::string, std::string> m = {{"format", "pt"},
                                          {"producer", "trainctl " TRAINCTL_VERSION},
                                          {"vocab_size", std::to_string(c.vocab_size)},
                                          {"block_size", std::to_string(c.max_seq_len)},
                                          {"n_layer", std::to_string(c.n_layer)},
                                          {"n_head", std::to_string(c.n_head)},
                                          {"n_embd", std::to_string(c.d_model)},
                                          {"bias", "true"},
                                          {"tied", "lm_head.weight=transformer.wte.weight"}};
  if (!job.empty()) m["job"] = job;
  return m;
}

int nanogpt_position(const std::string& name) {
  for (const std::string block : {"transformer.h.", "model.layers."}) {
    if (name.rfind(block, 0) == 0) return 2 + std::stoi(name.substr(block.size()));
  }
  if (name == "transformer.wte.weight" || name == "model.embed_tokens.weight") return 0;
  if (name == "transformer.wpe.weight") return 1;
  return 1 << 30;
}

void check_export_target(const std::filesystem::path& checkpoint_dir,
                         const std::filesystem::path& out) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path target = fs::weakly_canonical(fs::absolute(out, ec), ec);
  const fs::path source = fs::weakly_canonical(fs::absolute(checkpoint_dir, ec), ec);
  for (fs::path dir = target.parent_path(); !dir.empty(); dir = dir.parent_path()) {
    const bool is_checkpoint = dir == source || fs::exists(dir / kMetadataFile, ec);
    if (is_checkpoint) {
      throw InputError("cannot export to " + out.string() + ": it is inside the checkpoint " +
                       dir.string() +
                       " (the model would replace or sit among its shards); write it outside, "
                       "e.g. next to the run's checkpoints/ directory");
    }
    if (dir == dir.parent_path()) break;
  }
}

ExportSummary export_full_model(CheckpointReader& reader, const std::filesystem::path& out) {
  check_export_target(reader.dir(), out);
  // A checkpoint that lacks a tensor (or a rank's file) would export a model with holes.
  const std::vector<std::string> problems = reader.check_coverage();
  if (!problems.empty()) {
    throw CheckpointCorrupt(problems.front() +
                            (problems.size() > 1 ? " (and " + std::to_string(problems.size() - 1) +
                                                       " more problems: trainctl ckpt verify "
                                                       "lists them)"
                                                 : std::string()));
  }
  const std::vector<std::string> names = model_tensor_names(reader);
  if (names.empty()) {
    throw CheckpointCorrupt("checkpoint " + reader.dir().string() +
                            " holds no model tensors: nothing to export");
  }
  std::vector<SafetensorsEntry> entries;
  for (const std::string& name : names)
    entries.push_back({name, "F32", reader.global_shape(name), 0, 0});
  const CheckpointMetadata& meta = reader.metadata();
  const std::string job =
      meta.extra.is_object() && meta.extra.contains("job") && meta.extra["job"].is_string()
          ? meta.extra["job"].get<std::string>()
          : std::string();
  const std::string header = encode_safetensors_header(entries, nanogpt_metadata(meta.model, job));

  return write_model_file(reader, names, header, out);
}

std::vector<std::string> model_tensor_names(CheckpointReader& reader) {
  std::vector<std::string> names;
  for (const std::string& name : reader.tensor_names()) {
    if (!is_optimizer_tensor(name)) names.push_back(name);
  }
  std::stable_sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) {
    return nanogpt_position(a) < nanogpt_position(b);
  });
  return names;
}

ExportSummary write_model_file(CheckpointReader& reader, const std::vector<std::string>& names,
                               const std::string& header, const std::filesystem::path& out,
                               const TensorTransform& transform) {
  ExportSummary summary;
  const std::filesystem::path tmp = out.string() + ".tmp";
  try {
    DurableFile file(tmp);
    file.write(header.data(), header.size());
    for (const std::string& name : names) {
      std::vector<float> values = reader.read_full(name);
      if (transform) transform(name, values);
      file.write(values.data(), values.size() * sizeof(float));
      ++summary.tensors;
      summary.parameters += static_cast<int64_t>(values.size());
    }
    file.finish();
    summary.bytes = file.bytes();
  } catch (...) {
    std::error_code ec;
    std::filesystem::remove(tmp, ec);
    throw;
  }
  std::filesystem::rename(tmp, out);
  return summary;
}

}  // namespace trainctl::checkpoint
