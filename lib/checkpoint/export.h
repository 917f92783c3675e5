#pragma once
// A checkpoint's model as one safetensors file that nanoGPT (PyTorch) loads: every parameter
// reassembled from its shards under its nanoGPT name with its global shape (nn.Linear's
// [out, in]), optimizer state left out. lm_head.weight is not written: it is tied to
// transformer.wte.weight (as in nanoGPT), and safetensors cannot store two names for one
// tensor.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "checkpoint/reader.h"
#include "model/model_config.h"

namespace trainctl::checkpoint {

// The __metadata__ of an exported model (the same keys the end-of-training export writes):
// format, producer, nanoGPT's GPTConfig fields, tying (llama: Hugging Face LlamaConfig's
// fields and tie_word_embeddings). `job` is omitted when empty.
std::map<std::string, std::string> nanogpt_metadata(const model::ModelConfig& config,
                                                    const std::string& job);

// Sort key for nanoGPT's tensor order: wte, wpe, blocks by index, then the rest (ln_f);
// llama: embed_tokens, layers by index, the rest;
// sort stably so ties keep their order.
int nanogpt_position(const std::string& name);

struct ExportSummary {
  int tensors = 0;
  int64_t parameters = 0;
  uint64_t bytes = 0;
};

// Throws InputError when `out` lies inside `checkpoint_dir` or inside any other checkpoint
// directory (one holding metadata.json), symbolic links resolved: the export's rename would
// replace a shard (`--out CKPT/rank_00000.safetensors`) or add a file to a checkpoint.
void check_export_target(const std::filesystem::path& checkpoint_dir,
                         const std::filesystem::path& out);

// The checkpoint's model tensors (optimizer state left out) in nanoGPT's order.
std::vector<std::string> model_tensor_names(CheckpointReader& reader);

// Writes `header` (a safetensors header for `names`, in that order) and then each tensor of
// `names` reassembled from its shards, passed through `transform` when one is given (the
// Hugging Face export transposes Conv1D weights), to `out` atomically: a temporary file
// renamed into place only when complete, removed on failure. Peak memory: one tensor.
using TensorTransform = std::function<void(const std::string& name, std::vector<float>& values)>;
ExportSummary write_model_file(CheckpointReader& reader, const std::vector<std::string>& names,
                               const std::string& header, const std::filesystem::path& out,
                               const TensorTransform& transform = {});

// Writes `out` atomically (temporary file + rename), one tensor at a time (peak memory: the
// largest tensor). Refuses (check_export_target) an `out` inside a checkpoint. Throws
// CheckpointCorrupt, before writing anything, when the checkpoint is incomplete or
// inconsistent (reader.check_coverage()) or holds no model tensor, and while writing when a
// needed file is damaged; `out` is then left untouched.
ExportSummary export_full_model(CheckpointReader& reader, const std::filesystem::path& out);

}  // namespace trainctl::checkpoint
