#include "model/norm.h"

namespace trainctl::model {

Norm::Norm(const ModelContext& ctx, ParamList& params, const std::string& prefix) : ctx_(ctx) {
  const int64_t C = ctx.config.d_model;
  w_ = params.replicated(prefix + ".weight", {C}, Init::ones, 0, false);
  if (!ctx.config.llama()) b_ = params.replicated(prefix + ".bias", {C}, Init::zeros, 0, false);
}

void Norm::allocate(ActivationArena& arena) {
  if (ctx_.sp())
    sp_grads_ = arena.shared("norm.sp_grads", 2 * ctx_.config.d_model, MemoryUse::workspace);
}

NormActs Norm::keep(ActivationArena& arena, const std::string& key, int slot) const {
  NormActs a;
  a.out = arena.keep(key, int64_t{ctx_.N()} * ctx_.config.d_model, slot);
  // The statistics stay fp32: one value a row each, and the backward's scale.
  a.mean = arena.take(ctx_.rows(), MemoryUse::activations);
  a.rstd = arena.take(ctx_.rows(), MemoryUse::activations);
  return a;
}

NormActs Norm::take(ActivationArena& arena, MemoryUse use) const {
  const int64_t rows = ctx_.rows();
  NormActs a;
  a.out = arena.take(int64_t{ctx_.N()} * ctx_.config.d_model, use);
  a.mean = arena.take(rows, use);
  a.rstd = arena.take(rows, use);
  return a;
}

void Norm::forward(const NormActs& a, const float* x) const {
  const int rows = ctx_.rows(), C = ctx_.config.d_model;
  auto& w = ctx_.w();
  // Sequence parallel: this rank's rows into the row scratch, then all of them into out.
  float* out = ctx_.sp() ? ctx_.sp_rows : a.out;
  if (b_ < 0) {
    ctx_.be().rmsnorm_forward(out, a.rstd, x, w.data(w_), rows, C, ctx_.config.norm_eps);
  } else {
    ctx_.be().layernorm_forward(out, a.mean, a.rstd, x, w.data(w_), w.data(b_), rows, C);
  }
  ctx_.round_kept(out, static_cast<size_t>(rows) * C);
  if (ctx_.sp()) ctx_.sp_gather(out, a.out);
}

void Norm::backward(float* dx, const float* dout, const float* x, const NormActs& a) const {
  const int rows = ctx_.rows(), C = ctx_.config.d_model;
  auto& be = ctx_.be();
  auto& w = ctx_.w();
  // Sequence parallel: the gradients of this rank's rows, summed over the TP group, then
  // accumulated (so every TP rank holds the same full gradient, as without it).
  float* dw = w.grad(w_);
  float* db = b_ >= 0 ? w.grad(b_) : nullptr;
  if (ctx_.sp()) {
    be.zero(sp_grads_, 2 * static_cast<size_t>(C));
    dw = sp_grads_;
    db = b_ >= 0 ? sp_grads_ + C : nullptr;
  }
  if (b_ < 0) {
    be.rmsnorm_backward(dx, dw, dout, x, w.data(w_), a.rstd, rows, C);
  } else {
    be.layernorm_backward(dx, dw, db, dout, x, w.data(w_), a.mean, a.rstd, rows, C);
  }
  if (!ctx_.sp()) return;
  const size_t n = b_ >= 0 ? 2 * static_cast<size_t>(C) : static_cast<size_t>(C);
  ctx_.tp_allreduce(sp_grads_, n);
  be.add_inplace(w.grad(w_), sp_grads_, static_cast<size_t>(C));
  if (b_ >= 0) be.add_inplace(w.grad(b_), sp_grads_ + C, static_cast<size_t>(C));
}

}  // namespace trainctl::model
