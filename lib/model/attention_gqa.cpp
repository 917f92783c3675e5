#include "model/attention_gqa.h"

#include "model/fused_linear.h"

namespace trainctl::model {

GqaAttention::GqaAttention(const ModelContext& ctx, ParamList& params, const std::string& prefix)
    : ctx_(ctx),
      C_local_(ctx.config.d_model / ctx.tp_size()),
      NH_local_(ctx.config.n_head / ctx.tp_size()),
      NKV_local_(ctx.config.kv_heads() / ctx.tp_size()),
      qkv_width_(ctx.config.qkv_rows() / ctx.tp_size()) {
  const ModelConfig& c = ctx.config;
  const int64_t C = c.d_model, q = int64_t{c.n_head} * c.head_dim();
  const int64_t kv = int64_t{c.kv_heads()} * c.head_dim();
  q_ = params.split(prefix + ".q_proj.weight", {q, C}, Init::normal, kInitStd, true, 0);
  k_ = params.split(prefix + ".k_proj.weight", {kv, C}, Init::normal, kInitStd, true, 0);
  v_ = params.split(prefix + ".v_proj.weight", {kv, C}, Init::normal, kInitStd, true, 0);
  o_ = params.split(prefix + ".o_proj.weight", {C, q}, Init::normal, residual_init_std(c), true, 1);
  first_ = q_;
  end_ = o_ + 1;
  if (ctx.cp.active()) ring_ = std::make_unique<RingAttention>(shape(), ctx.cp, ctx.cp_ring);
}

void GqaAttention::rope(float* x, bool backward) const {
  const ModelConfig& c = ctx_.config;
  auto& be = ctx_.be();
  // q and k rotate together (they are the first heads of each row); v does not.
  const int heads = NH_local_ + NKV_local_;
  auto apply = [&](float* rows, int B, int T, int pos0) {
    if (backward) {
      be.rope_backward(rows, B, T, qkv_width_, heads, c.head_dim(), c.rope_theta, pos0);
    } else {
      be.rope_forward(rows, B, T, qkv_width_, heads, c.head_dim(), c.rope_theta, pos0);
    }
  };
  if (!ctx_.cp.active()) return apply(x, ctx_.B, ctx_.T, 0);
  for (int b = 0; b < ctx_.B; ++b) {
    for (int l = 0; l < 2; ++l) {
      const int64_t row = int64_t{b} * ctx_.T + l * ctx_.cp.chunk;
      apply(x + row * qkv_width_, 1, ctx_.cp.chunk, ctx_.cp.first_position(l, ctx_.cp.rank));
    }
  }
}

ops::AttentionShape GqaAttention::shape() const {
  return {ctx_.B, ctx_.T, NH_local_, NKV_local_, ctx_.config.head_dim()};
}

void GqaAttention::allocate(ActivationArena& arena, int slots) {
  const int64_t N = ctx_.N(), W = qkv_width_;
  const int64_t lse = int64_t{ctx_.B} * NH_local_ * ctx_.T;
  dqkv_ = arena.shared("attention.gqa.dqkv", N * W, MemoryUse::workspace);
  acts_ = allocate_attention_acts(arena, "attention.gqa", N * W, N * C_local_, lse,
                                  ctx_.recompute == Recompute::full, slots);
  if (ring_) ring_->allocate(arena);
}

void GqaAttention::project_out(const Acts& a, float* y) {
  const int N = ctx_.N(), C = ctx_.config.d_model;
  ctx_.be().linear_forward(y, a.att, ctx_.w().data(o_), nullptr, N, C_local_, C);
  ctx_.tp_sum_rows(y);
}

void GqaAttention::forward(int slot, const float* h, float* y) {
  const Acts& a = acts_.at(static_cast<size_t>(slot));
  const ModelConfig& c = ctx_.config;
  fused_forward(ctx_, a.qkv, qkv_width_, h, {q_, k_, v_}, c.d_model);
  rope(a.qkv, false);
  const auto N = static_cast<size_t>(ctx_.N());
  ctx_.round_kept(a.qkv, N * static_cast<size_t>(qkv_width_));
  if (ring_) {
    ring_->forward(ctx_.be(), a.att, a.lse, a.qkv);
  } else {
    ctx_.be().attention_forward(a.att, a.lse, a.qkv, shape());
  }
  ctx_.round_kept(a.att, N * static_cast<size_t>(C_local_));
  project_out(a, y);
}

void GqaAttention::refill(int slot, float* y) {
  if (y != nullptr) project_out(acts_.at(static_cast<size_t>(slot)), y);
}

void GqaAttention::backward(int slot, const float* h, const float* dy, float* dh,
                            const PieceReport& report) {
  const Acts& a = acts_.at(static_cast<size_t>(slot));
  const ModelConfig& c = ctx_.config;
  const int C = c.d_model;
  auto& be = ctx_.be();
  // dh holds d(attention output) [N, C/tp] until the input gradient overwrites it.
  linear_backward_split(ctx_, dh, o_, -1, dy, a.att, C_local_, C);
  if (ring_) {
    ring_->backward(be, dqkv_, dh, a.qkv, a.att, a.lse);
  } else {
    be.attention_backward(dqkv_, dh, a.qkv, a.att, a.lse, shape());
  }
  rope(dqkv_, true);  // from the rotated q and k back to the projections' outputs
  fused_weight_grads(ctx_, dqkv_, qkv_width_, h, {q_, k_, v_}, C);
  report.ready();
  fused_input_grad(ctx_, dh, dqkv_, qkv_width_, {q_, k_, v_}, C);
  ctx_.tp_sum_rows(dh);
}

double GqaAttention::macs_per_token(int seq_len) const {
  // q, k, v and o, then 2 T C in attention (causal: half of T on average for the scores
  // and for the weighted sum).
  const double C = ctx_.config.d_model;
  return (ctx_.config.qkv_rows() + C) * C + 2.0 * static_cast<double>(seq_len) * C;
}

}  // namespace trainctl::model
