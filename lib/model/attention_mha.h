#pragma once
// GPT-2's causal multi-head self-attention (nanoGPT's CausalSelfAttention): one fused
// c_attn projection to q | k | v with bias, flash-style attention (no [T,T] probabilities
// kept), c_proj back to d_model with bias; positions come from the embedding, not from
// here. Megatron tensor parallelism: c_attn column-parallel by heads (each of q, k and v
// split the same way), c_proj row-parallel, one TP allreduce of the output in forward and
// one of the input gradient in backward.
#include <memory>
#include <string>
#include <vector>

#include "model/attention_acts.h"
#include "model/block.h"
#include "model/param_list.h"
#include "model/ring_attention.h"

namespace trainctl::model {

class MhaAttention final : public Branch {
 public:
  // Declares `prefix`.c_attn.{weight,bias} and `prefix`.c_proj.{weight,bias}.
  MhaAttention(const ModelContext& ctx, ParamList& params, const std::string& prefix);

  void allocate(ActivationArena& arena, int slots) override;
  void forward(int slot, const float* h, float* y) override;
  void refill(int slot, float* y) override;
  void backward(int slot, const float* h, const float* dy, float* dh,
                const PieceReport& report) override;
  double macs_per_token(int seq_len) const override;

 private:
  // Kept for backward unless recomputation is full.
  using Acts = AttentionActs;
  void project_out(const Acts& a, float* y);

  const ModelContext& ctx_;
  int C_local_, NH_local_;  // d_model / tp, heads / tp
  int attn_w_, attn_b_, proj_w_, proj_b_;
  std::vector<Acts> acts_;               // per slot
  float* dqkv_ = nullptr;                // backward scratch [N, 3C/tp]
  std::unique_ptr<RingAttention> ring_;  // context parallelism (cp > 1)
};

}  // namespace trainctl::model
