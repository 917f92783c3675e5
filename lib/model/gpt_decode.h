#pragma once
// Inference for the models of model/gpt.h (both families) with a key/value cache:
// incremental decoding feeds one token per step, which attends to the keys and values
// cached for the positions before it, so producing n tokens costs O(n) block evaluations
// instead of O(n^2). Separate from Gpt (which keeps training buffers, shards and
// recomputation): the whole model, one sequence, forward only. Weights, caches and scratch
// live in the backend's memory and every operation is a backend op (attention over the
// cache is Backend::attention_decode), so the same decoder runs on the CPU and on a GPU;
// only the logits come back to the host.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/kv_cache.h"
#include "model/model_config.h"
#include "ops/backend.h"

namespace trainctl::model {

// Fills `out` (numel floats, row-major, the training layout) with the full tensor `name`.
using WeightLoader = std::function<void(const std::string& name, float* out, size_t numel)>;

class GptDecoder {
 public:
  // Loads every parameter (gpt: nanoGPT names, transformer.wte.weight, ...; llama: Hugging
  // Face's, model.embed_tokens.weight, ...) through `load` (into host memory, one tensor at
  // a time, then copied to the backend). Llama applies RoPE at each token's position (pos0
  // = the cache's position) and caches n_kv_head k/v heads.
  GptDecoder(const ModelConfig& config, ops::Backend& backend, const WeightLoader& load);
  ~GptDecoder();
  GptDecoder(const GptDecoder&) = delete;
  GptDecoder& operator=(const GptDecoder&) = delete;

  const ModelConfig& config() const { return config_; }
  // Tokens in the cache (the position the next step() writes).
  int position() const { return pos_; }
  // Forgets the cached sequence.
  void reset() { pos_ = 0; }

  // Appends `token` at position() and returns the logits [vocab_size] of the next token.
  // Throws std::out_of_range when the token is outside the vocabulary or the cache is
  // full (position() == max_seq_len).
  const std::vector<float>& step(int32_t token);

  // Reference: one forward over the whole sequence without the cache (the training
  // attention kernel); logits [tokens.size(), vocab_size]. Leaves the cache alone.
  std::vector<float> forward_full(const std::vector<int32_t>& tokens);

  // The parameter names and shapes the decoder loads, in loading order: the training
  // model's (gpt_param_specs of the whole model).
  static std::vector<std::pair<std::string, std::vector<int64_t>>> parameter_shapes(
      const ModelConfig& config);

 private:
  // Llama: attn_w is q | k | v stacked ([(NH + 2 NKV) hd, C]), fc_w gate | up ([2H, C]),
  // proj_w o_proj, fc_proj_w down_proj; the biases and ln*_b are null. All in backend memory.
  struct Block {
    const float *ln1_w = nullptr, *ln1_b = nullptr, *attn_w = nullptr, *attn_b = nullptr;
    const float *proj_w = nullptr, *proj_b = nullptr, *ln2_w = nullptr, *ln2_b = nullptr;
    const float *fc_w = nullptr, *fc_b = nullptr, *fc_proj_w = nullptr, *fc_proj_b = nullptr;
    KvCache cache;
  };
  // A scratch buffer in backend memory that grows to the largest size asked for.
  struct Scratch {
    float* p = nullptr;
    size_t n = 0;
  };
  float* alloc(size_t n);  // backend memory owned by the decoder
  float* upload(const std::vector<float>& host);
  float* grow(Scratch& s, size_t n);
  // out = the family's norm of x [N, C] (LayerNorm with bias, or RMSNorm).
  void norm(float* out, const float* x, const float* w, const float* b, int N);
  // x += mlp(ln_2(x)) for N rows.
  void block_mlp(const Block& b, float* x, int N);
  const float* head() const { return lm_head_ != nullptr ? lm_head_ : wte_; }

  ModelConfig config_;
  ops::Backend& be_;
  std::vector<void*> owned_;
  const float *wte_ = nullptr, *wpe_ = nullptr, *lnf_w_ = nullptr, *lnf_b_ = nullptr;
  const float* lm_head_ = nullptr;
  std::vector<Block> blocks_;
  int pos_ = 0;
  // Scratch, reused between steps.
  Scratch x_, h_, qkv_, att_, proj_, stats_, fc_, y_, logits_dev_;
  std::vector<float> logits_;  // the host copy step() returns
};

}  // namespace trainctl::model
