#pragma once
// A checkpoint's model as a Hugging Face folder that `transformers` loads with
// AutoModelForCausalLM.from_pretrained(dir): LlamaForCausalLM for llama (export_hf_llama),
// MixtralForCausalLM for llama + moe (export_hf_mixtral),
// for GPT GPT2LMHeadModel:
//   model.safetensors  the parameters under GPT2LMHeadModel's names (nanoGPT's names are
//                      the same); the four projection matrices (attn.c_attn, attn.c_proj,
//                      mlp.c_fc, mlp.c_proj) transposed to Conv1D's [in, out] layout
//                      (trainctl stores nn.Linear's [out, in]); lm_head is tied to wte
//   config.json        GPT2Config: dimensions, n_positions = the model's seq_len,
//                      activation gelu_new (tanh GELU), layer_norm_epsilon 1e-5, no dropout
//   tokenizer files    when given: copied, with a tokenizer_config.json naming the class
// A checkpoint whose tensors are not its family's is refused with an InputError.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <vector>

#include "checkpoint/export.h"
#include "checkpoint/reader.h"

namespace trainctl::checkpoint {

struct HfExportOptions {
  std::filesystem::path out_dir;
  // tokenizer.json, or vocab.json + merges.txt; empty: no tokenizer files.
  std::vector<std::filesystem::path> tokenizer_files;
  std::optional<int64_t> eos_token_id;  // the tokenizer's end-of-text token
};

// Throws InputError unless the checkpoint holds the tensors of the family its metadata
// names (GPT or Llama), the two the Hugging Face export knows.
void require_gpt_checkpoint(CheckpointReader& reader);

// Writes the folder (model.safetensors atomically, one tensor at a time) for the
// checkpoint's family. The same refusals as export_full_model (damaged, incomplete, out_dir
// inside a checkpoint).
ExportSummary export_hf(CheckpointReader& reader, const HfExportOptions& options);
ExportSummary export_hf_gpt2(CheckpointReader& reader, const HfExportOptions& options);
// LlamaForCausalLM: the tensors under their own (Hugging Face) names, untransposed;
// config.json a LlamaConfig (rms_norm_eps, rope_theta, num_key_value_heads,
// intermediate_size, tie_word_embeddings; no lm_head tensor when tied).
ExportSummary export_hf_llama(CheckpointReader& reader, const HfExportOptions& options);
// MixtralForCausalLM for llama + moe when the model is Mixtral's (softmax top-k, no shared
// experts, every layer MoE, dropless, no expert bias); else an InputError saying which of
// these it is not. config.json a MixtralConfig (num_local_experts, num_experts_per_tok,
// intermediate_size = one expert's width).
ExportSummary export_hf_mixtral(CheckpointReader& reader, const HfExportOptions& options);

}  // namespace trainctl::checkpoint
