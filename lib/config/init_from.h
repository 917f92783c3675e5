#pragma once
// model.init_from: a Hugging Face model folder (config.json + safetensors weights) whose
// config.json supplies the model's architecture keys. config.json's `architectures` names
// GPT2LMHeadModel (model.type gpt), LlamaForCausalLM (llama) or MixtralForCausalLM (llama
// with model.moe: experts in every layer, softmax router); anything else is refused. A key the job
// spec gives as well must agree with config.json (model.seq_len may be shorter than GPT-2's
// n_positions: the first rows of the position table are used; for Llama any seq_len).
#include "config/job_spec.h"
#include "config/locations.h"

namespace trainctl::config::detail {

struct HfModel {
  ModelSpec model;         // the architecture keys (Mixtral: llama + model.moe)
  int sliding_window = 0;  // Mixtral's attention window (0: none); seq_len may not exceed it
};

// The architecture of the folder `dir` (absolute). Throws InputError naming config.json when
// it is missing, not JSON, names no supported architecture, or describes a variant trainctl
// does not build (another activation, biases in Llama's projections, RoPE scaling, ...).
HfModel hf_model(const std::filesystem::path& dir);

// Fills `model` from model.init_from's config.json (model.init_from already resolved);
// keys the spec gave (locations.given) must agree, else InputError at the key naming both
// values. No-op without init_from.
void apply_init_from(ModelSpec& model, const Locations& locations);

}  // namespace trainctl::config::detail
