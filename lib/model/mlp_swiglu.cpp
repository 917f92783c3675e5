#include "model/mlp_swiglu.h"

#include "model/fused_linear.h"

namespace trainctl::model {

SwiGluMlp::SwiGluMlp(const ModelContext& ctx, ParamList& params, const std::string& prefix)
    : ctx_(ctx), H_local_(ctx.config.mlp_hidden() / ctx.tp_size()) {
  const int64_t C = ctx.config.d_model, H = ctx.config.mlp_hidden();
  gate_ = params.split(prefix + ".gate_proj.weight", {H, C}, Init::normal, kInitStd, true, 0);
  up_ = params.split(prefix + ".up_proj.weight", {H, C}, Init::normal, kInitStd, true, 0);
  down_ = params.split(prefix + ".down_proj.weight", {C, H}, Init::normal,
                       residual_init_std(ctx.config), true, 1);
  first_ = gate_;
  end_ = down_ + 1;
}

void SwiGluMlp::allocate(ActivationArena& arena, int slots) {
  const int64_t NH = int64_t{ctx_.N()} * H_local_;
  d_act_ = arena.shared("ffn.swiglu.d_act", NH, MemoryUse::workspace);
  d_fc_ = arena.shared("ffn.swiglu.d_fc", 2 * NH, MemoryUse::workspace);
  // Recomputed, the SwiGLU output lives in d_fc_: backward reads it (down_proj's weight
  // gradient) before swiglu_backward first writes d_fc_, and forward never touches d_fc_.
  const bool full = ctx_.recompute == Recompute::full;
  float* fc_shared = full ? arena.shared("ffn.swiglu.fc", 2 * NH, MemoryUse::recompute) : nullptr;
  for (int s = 0; s < slots; ++s) {
    Acts a{};
    a.fc = full ? fc_shared : arena.keep("ffn.swiglu.fc", 2 * NH, s);
    a.act = ctx_.recompute == Recompute::none ? arena.keep("ffn.swiglu.out", NH, s) : d_fc_;
    acts_.push_back(a);
  }
}

void SwiGluMlp::project_out(const Acts& a, float* y) {
  const int N = ctx_.N(), C = ctx_.config.d_model;
  ctx_.be().linear_forward(y, a.act, ctx_.w().data(down_), nullptr, N, H_local_, C);
  ctx_.tp_sum_rows(y);
}

void SwiGluMlp::forward(int slot, const float* h, float* y) {
  const Acts& a = acts_.at(static_cast<size_t>(slot));
  fused_forward(ctx_, a.fc, 2 * H_local_, h, {gate_, up_}, ctx_.config.d_model);
  ctx_.round_kept(a.fc, static_cast<size_t>(ctx_.N()) * 2 * H_local_);
  activate(a);
  project_out(a, y);
}

void SwiGluMlp::activate(const Acts& a) {
  ctx_.be().swiglu_forward(a.act, a.fc, ctx_.N(), H_local_);
  ctx_.round_kept(a.act, static_cast<size_t>(ctx_.N()) * H_local_);
}

void SwiGluMlp::refill(int slot, float* y) {
  const Acts& a = acts_.at(static_cast<size_t>(slot));
  activate(a);
  if (y != nullptr) project_out(a, y);
}

void SwiGluMlp::backward(int slot, const float* h, const float* dy, float* dh,
                         const PieceReport& report) {
  const Acts& a = acts_.at(static_cast<size_t>(slot));
  const int N = ctx_.N(), C = ctx_.config.d_model;
  linear_backward_split(ctx_, d_act_, down_, -1, dy, a.act, H_local_, C);
  ctx_.be().swiglu_backward(d_fc_, d_act_, a.fc, N, H_local_);
  // The weight gradients first (data parallelism reduces them behind the input gradient).
  fused_weight_grads(ctx_, d_fc_, 2 * H_local_, h, {gate_, up_}, C);
  report.ready();
  fused_input_grad(ctx_, dh, d_fc_, 2 * H_local_, {gate_, up_}, C);
  ctx_.tp_sum_rows(dh);
}

double SwiGluMlp::macs_per_token(int /*seq_len*/) const {
  const double C = ctx_.config.d_model;
  return 3.0 * ctx_.config.mlp_hidden() * C;
}

}  // namespace trainctl::model
