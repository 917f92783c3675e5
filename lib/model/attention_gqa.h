#pragma once
// Llama's grouped-query self-attention: separate q, k and v projections (n_head query heads
// sharing n_kv_head k/v heads), rotary position embeddings applied to q and k, flash-style
// causal attention, o_proj back to d_model; no biases. Hugging Face's names and nn.Linear
// layouts. Tensor parallelism splits q, k and v by whole heads (rows) and o_proj by its
// input columns: one TP allreduce of the output in forward, one of the input gradient in
// backward. Decoding with a key/value cache: model/kv_cache.h.
#include <string>
#include <vector>

#include "model/attention_acts.h"
#include "model/block.h"
#include "model/param_list.h"
#include "model/ring_attention.h"

namespace trainctl::model {

class GqaAttention final : public Branch {
 public:
  // Declares `prefix`.{q,k,v,o}_proj.weight.
  GqaAttention(const ModelContext& ctx, ParamList& params, const std::string& prefix);

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
  ops::AttentionShape shape() const;
  // RoPE at each token's true position (two chunks per sequence under cp).
  void rope(float* x, bool backward) const;

  const ModelContext& ctx_;
  int C_local_, NH_local_, NKV_local_, qkv_width_;  // local widths under tensor parallelism
  int q_, k_, v_, o_;
  std::vector<Acts> acts_;               // per slot
  float* dqkv_ = nullptr;                // backward scratch [N, qkv_width]
  std::unique_ptr<RingAttention> ring_;  // context parallelism (cp > 1)
};

}  // namespace trainctl::model
