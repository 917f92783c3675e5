#include "model/attention_mha.h"

#include "model/fused_linear.h"

namespace trainctl::model {

MhaAttention::MhaAttention(const ModelContext& ctx, ParamList& params, const std::string& prefix)
    : ctx_(ctx),
      C_local_(ctx.config.d_model / ctx.tp_size()),
      NH_local_(ctx.config.n_head / ctx.tp_size()) {
  const int64_t C = ctx.config.d_model;
  const float std_proj = residual_init_std(ctx.config);
  attn_w_ = params.split(prefix + ".c_attn.weight", {3 * C, C}, Init::normal, kInitStd, true, 0, 3);
  attn_b_ = params.split(prefix + ".c_attn.bias", {3 * C}, Init::zeros, 0, false, 0, 3);
  proj_w_ = params.split(prefix + ".c_proj.weight", {C, C}, Init::normal, std_proj, true, 1);
  proj_b_ = params.replicated(prefix + ".c_proj.bias", {C}, Init::zeros, 0, false);
  first_ = attn_w_;
  end_ = proj_b_ + 1;
  if (ctx.cp.active()) {
    ring_ = std::make_unique<RingAttention>(
        ops::AttentionShape::multi_head(ctx.B, ctx.T, C_local_, NH_local_), ctx.cp, ctx.cp_ring);
  }
}

void MhaAttention::allocate(ActivationArena& arena, int slots) {
  const int64_t N = ctx_.N(), W = 3 * int64_t{C_local_};
  const int64_t lse = int64_t{ctx_.B} * NH_local_ * ctx_.T;
  dqkv_ = arena.shared("attention.mha.dqkv", N * W, MemoryUse::workspace);
  acts_ = allocate_attention_acts(arena, "attention.mha", N * W, N * C_local_, lse,
                                  ctx_.recompute == Recompute::full, slots);
  if (ring_) ring_->allocate(arena);
}

void MhaAttention::project_out(const Acts& a, float* y) {
  const int N = ctx_.N(), C = ctx_.config.d_model;
  auto& w = ctx_.w();
  ctx_.be().linear_forward(y, a.att, w.data(proj_w_), ctx_.bias_here() ? w.data(proj_b_) : nullptr,
                           N, C_local_, C);
  ctx_.tp_sum_rows(y);
}

void MhaAttention::forward(int slot, const float* h, float* y) {
  const Acts& a = acts_.at(static_cast<size_t>(slot));
  const int N = ctx_.N(), C = ctx_.config.d_model;
  auto& w = ctx_.w();
  ctx_.be().linear_forward(a.qkv, h, w.data(attn_w_), w.data(attn_b_), N, C, 3 * C_local_);
  ctx_.round_kept(a.qkv, static_cast<size_t>(N) * 3 * C_local_);
  if (ring_) {
    ring_->forward(ctx_.be(), a.att, a.lse, a.qkv);
  } else {
    ctx_.be().attention_forward(a.att, a.lse, a.qkv, ctx_.B, ctx_.T, C_local_, NH_local_);
  }
  ctx_.round_kept(a.att, static_cast<size_t>(N) * C_local_);
  project_out(a, y);
}

void MhaAttention::refill(int slot, float* y) {
  if (y != nullptr) project_out(acts_.at(static_cast<size_t>(slot)), y);
}

void MhaAttention::backward(int slot, const float* h, const float* dy, float* dh,
                            const PieceReport& report) {
  const Acts& a = acts_.at(static_cast<size_t>(slot));
  const int N = ctx_.N(), C = ctx_.config.d_model, W = 3 * C_local_;
  auto& be = ctx_.be();
  auto& w = ctx_.w();
  // dh holds d(attention output) [N, C/tp] until the input gradient overwrites it.
  linear_backward_split(ctx_, dh, proj_w_, proj_b_, dy, a.att, C_local_, C);
  if (ring_) {
    ring_->backward(be, dqkv_, dh, a.qkv, a.att, a.lse);
  } else {
    be.attention_backward(dqkv_, dh, a.qkv, a.att, a.lse, ctx_.B, ctx_.T, C_local_, NH_local_);
  }
  // c_attn's weight gradient before its input gradient: data parallelism reduces the
  // attention's matrices behind that product (in block 0 this leaves only ln_1 and the
  // embeddings for the exposed tail of the step).
  linear_backward_split(ctx_, nullptr, attn_w_, attn_b_, dqkv_, h, C, W);
  report.ready();
  // Each TP rank has part of d(h); the allreduce sums.
  be.gemm(false, false, N, C, W, 1.0f, dqkv_, W, w.data(attn_w_), C, 0.0f, dh, C);
  ctx_.tp_sum_rows(dh);
}

double MhaAttention::macs_per_token(int seq_len) const {
  // c_attn and c_proj, then 2 T C in attention (causal: half of T on average for the
  // scores and for the weighted sum).
  const double C = ctx_.config.d_model;
  return 4.0 * C * C + 2.0 * static_cast<double>(seq_len) * C;
}

}  // namespace trainctl::model
