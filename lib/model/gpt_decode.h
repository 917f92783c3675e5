#pragma once
// Inference for the models of model/gpt.h (both families) with a key/value cache:
// incremental decoding feeds
// one token per step, which attends to the keys and values cached for the positions before
// it, so producing n tokens costs O(n) block evaluations instead of O(n^2). Separate from
// Gpt (which keeps training buffers, shards and recomputation): the whole model, one
// sequence, forward only, on the CPU backend's ops.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/model_config.h"
#include "ops/backend.h"

namespace trainctl::model {

// Fills `out` (numel floats, row-major, the training layout) with the full tensor `name`.
using WeightLoader = std::function<void(const std::string& name, float* out, size_t numel)>;

class GptDecoder {
 public:
  // Loads every parameter (gpt: nanoGPT names, transformer.wte.weight, ...; llama: Hugging
  // Face's, model.embed_tokens.weight, ...) through `load`. `backend` must work on host
  // memory (the CPU backend). Llama applies RoPE at each token's position (pos0 = the
  // cache's position) and caches n_kv_head k/v heads.
  GptDecoder(const ModelConfig& config, ops::Backend& backend, const WeightLoader& load);

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

  // The parameter names and shapes the decoder loads, in loading order.
  static std::vector<std::pair<std::string, std::vector<int64_t>>> parameter_shapes(
      const ModelConfig& config);

 private:
  // Llama: attn_w is q | k | v stacked ([(NH + 2 NKV) hd, C]), fc_w gate | up ([2H, C]),
  // proj_w o_proj, fc_proj_w down_proj; the biases and ln*_b are empty.
  struct Block {
    std::vector<float> ln1_w, ln1_b, attn_w, attn_b, proj_w, proj_b;
    std::vector<float> ln2_w, ln2_b, fc_w, fc_b, fc_proj_w, fc_proj_b;
    std::vector<float> k_cache, v_cache;  // [max_seq_len, n_kv_head * head_dim]
  };
  // out = the family's norm of x [N, C] (LayerNorm with bias, or RMSNorm).
  void norm(float* out, const float* x, const std::vector<float>& w, const std::vector<float>& b,
            int N);
  // x += mlp(ln_2(x)) for N rows.
  void block_mlp(const Block& b, float* x, int N);
  static const float* bias(const std::vector<float>& b) { return b.empty() ? nullptr : b.data(); }
  const float* head() const { return lm_head_.empty() ? wte_.data() : lm_head_.data(); }

  ModelConfig config_;
  ops::Backend& be_;
  std::vector<float> wte_, wpe_, lnf_w_, lnf_b_, lm_head_;
  std::vector<Block> blocks_;
  int pos_ = 0;
  // Per-step scratch.
  std::vector<float> x_, h_, qkv_, y_, stats_, fc_, logits_;
};

}  // namespace trainctl::model
