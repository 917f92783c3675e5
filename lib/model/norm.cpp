#include "model/norm.h"

namespace trainctl::model {

Norm::Norm(const ModelContext& ctx, ParamList& params, const std::string& prefix) : ctx_(ctx) {
  const int64_t C = ctx.config.d_model;
  w_ = params.replicated(prefix + ".weight", {C}, Init::ones, 0, false);
  if (!ctx.config.llama()) b_ = params.replicated(prefix + ".bias", {C}, Init::zeros, 0, false);
}

NormActs Norm::take(ActivationArena& arena, MemoryUse use) const {
  const int64_t N = ctx_.N();
  NormActs a;
  a.out = arena.take(N * ctx_.config.d_model, use);
  a.mean = arena.take(N, use);
  a.rstd = arena.take(N, use);
  return a;
}

void Norm::forward(const NormActs& a, const float* x) const {
  const int N = ctx_.N(), C = ctx_.config.d_model;
  auto& w = ctx_.w();
  if (b_ < 0) {
    ctx_.be().rmsnorm_forward(a.out, a.rstd, x, w.data(w_), N, C, ctx_.config.norm_eps);
  } else {
    ctx_.be().layernorm_forward(a.out, a.mean, a.rstd, x, w.data(w_), w.data(b_), N, C);
  }
}

void Norm::backward(float* dx, const float* dout, const float* x, const NormActs& a) const {
  const int N = ctx_.N(), C = ctx_.config.d_model;
  auto& w = ctx_.w();
  if (b_ < 0) {
    ctx_.be().rmsnorm_backward(dx, w.grad(w_), dout, x, w.data(w_), a.rstd, N, C);
  } else {
    ctx_.be().layernorm_backward(dx, w.grad(w_), w.grad(b_), dout, x, w.data(w_), a.mean, a.rstd, N,
                                 C);
  }
}

}  // namespace trainctl::model
