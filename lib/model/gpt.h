#pragma once
// nanoGPT's GPT with explicit forward and backward (no autograd): learned positions,
// pre-LayerNorm blocks, 4x MLP with tanh-GELU, biases everywhere, LM head tied to the
// token embedding. Parameters use nanoGPT's names and layouts so exports load into
// PyTorch as they are.
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "model/gpt_config.h"
#include "model/parameters.h"
#include "ops/backend.h"

namespace trainctl::model {

class Gpt {
 public:
  // Activation buffers are sized for micro-batches of `batch` sequences of `seq_len`.
  Gpt(const GptConfig& config, ops::Backend& backend, int batch, int seq_len);
  ~Gpt();
  Gpt(const Gpt&) = delete;
  Gpt& operator=(const Gpt&) = delete;

  const GptConfig& config() const { return config_; }
  ParameterSet& params() { return params_; }
  const ParameterSet& params() const { return params_; }

  // GPT-2 initialisation (N(0, 0.02), residual projections scaled by 1/sqrt(2 n_layer)),
  // a pure function of the seed.
  void init_weights(uint64_t seed);

  // One micro-batch, forward and backward. tokens/targets are [batch, seq_len]; targets < 0
  // are ignored. Parameter gradients ACCUMULATE, scaled so that each token's loss
  // contributes `grad_scale` (pass 1 / tokens-per-optimizer-step for a mean over the step).
  // Returns the sum of the token losses and sets *count to the number of counted tokens.
  double forward_backward(const int32_t* tokens, const int32_t* targets, float grad_scale,
                          int64_t* count);
  // Forward only (evaluation). Same return convention.
  double forward_loss(const int32_t* tokens, const int32_t* targets, int64_t* count);

  // The flat gradient buffer as contiguous pieces, [begin, end) float offsets, in the
  // order the backward pass makes them final: for each block from the last to the first,
  // its MLP half (ln_2, c_fc, mlp.c_proj; the last block's also holds ln_f) and then its
  // attention half (ln_1, c_attn, attn.c_proj); the embeddings come last. Half-layer
  // pieces let data parallelism start reducing a block's MLP gradients while the same
  // block's attention backward still runs.
  std::vector<std::pair<int64_t, int64_t>> grad_pieces() const;

  // Called during backward with the index (into grad_pieces()) of each piece whose
  // gradients have just become final, in increasing order.
  void set_grad_ready_hook(std::function<void(int piece)> hook) { grad_ready_ = std::move(hook); }

 private:
  struct BlockParams;
  struct BlockActs;

  double forward(const int32_t* tokens, const int32_t* targets, bool backward, float grad_scale,
                 int64_t* count);
  void block_forward(int l, const float* x);
  void block_backward(int l, const float* x, float* dres);
  void grad_ready(int piece) const {
    if (grad_ready_) grad_ready_(piece);
  }
  float* act(size_t n);

  GptConfig config_;
  ops::Backend& backend_;
  int B_, T_;
  ParameterSet params_;
  size_t wte_, wpe_, lnf_w_, lnf_b_;
  std::vector<BlockParams> blocks_;
  std::vector<BlockActs> acts_;
  std::vector<void*> buffers_;  // every activation/scratch allocation, freed in ~Gpt
  // Top-level activations and backward scratch.
  float* encoded_ = nullptr;
  float *lnf_ = nullptr, *lnf_mean_ = nullptr, *lnf_rstd_ = nullptr;
  float* losses_ = nullptr;
  float *dres_ = nullptr, *dC_ = nullptr, *dC2_ = nullptr, *dqkv_ = nullptr;
  float *d4C_a_ = nullptr, *d4C_b_ = nullptr, *scratchC_ = nullptr;
  std::function<void(int)> grad_ready_;
};

}  // namespace trainctl::model
