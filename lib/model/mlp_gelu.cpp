#include "model/mlp_gelu.h"

#include "model/fused_linear.h"

namespace trainctl::model {

GeluMlp::GeluMlp(const ModelContext& ctx, ParamList& params, const std::string& prefix)
    : ctx_(ctx), H_local_(ctx.config.mlp_hidden() / ctx.tp_size()) {
  const int64_t C = ctx.config.d_model;
  fc_w_ = params.split(prefix + ".c_fc.weight", {4 * C, C}, Init::normal, kInitStd, true, 0);
  fc_b_ = params.split(prefix + ".c_fc.bias", {4 * C}, Init::zeros, 0, false, 0);
  proj_w_ = params.split(prefix + ".c_proj.weight", {C, 4 * C}, Init::normal,
                         residual_init_std(ctx.config), true, 1);
  proj_b_ = params.replicated(prefix + ".c_proj.bias", {C}, Init::zeros, 0, false);
  first_ = fc_w_;
  end_ = proj_b_ + 1;
}

void GeluMlp::allocate(ActivationArena& arena, int slots) {
  const int64_t NH = int64_t{ctx_.N()} * H_local_;
  d_act_ = arena.shared("ffn.gelu.d_act", NH, MemoryUse::workspace);
  d_fc_ = arena.shared("ffn.gelu.d_fc", NH, MemoryUse::workspace);
  // Recomputed, the GELU output lives in d_fc_: backward reads it (c_proj's weight
  // gradient) before gelu_backward first writes d_fc_, and forward never touches d_fc_.
  const bool full = ctx_.recompute == Recompute::full;
  float* fc_shared = full ? arena.shared("ffn.gelu.fc", NH, MemoryUse::recompute) : nullptr;
  for (int s = 0; s < slots; ++s) {
    Acts a{};
    a.fc = full ? fc_shared : arena.keep("ffn.gelu.fc", NH, s);
    a.gelu = ctx_.recompute == Recompute::none ? arena.keep("ffn.gelu.out", NH, s) : d_fc_;
    acts_.push_back(a);
  }
}

void GeluMlp::project_out(const Acts& a, float* y) {
  const int N = ctx_.N(), C = ctx_.config.d_model;
  auto& w = ctx_.w();
  ctx_.be().linear_forward(y, a.gelu, w.data(proj_w_), ctx_.bias_here() ? w.data(proj_b_) : nullptr,
                           N, H_local_, C);
  ctx_.tp_sum_rows(y);
}

void GeluMlp::forward(int slot, const float* h, float* y) {
  const Acts& a = acts_.at(static_cast<size_t>(slot));
  const int N = ctx_.N(), C = ctx_.config.d_model;
  auto& w = ctx_.w();
  ctx_.be().linear_forward(a.fc, h, w.data(fc_w_), w.data(fc_b_), N, C, H_local_);
  ctx_.round_kept(a.fc, static_cast<size_t>(N) * H_local_);
  activate(a);
  project_out(a, y);
}

void GeluMlp::activate(const Acts& a) {
  const size_t NH = static_cast<size_t>(ctx_.N()) * H_local_;
  ctx_.be().gelu_forward(a.gelu, a.fc, NH);
  ctx_.round_kept(a.gelu, NH);
}

void GeluMlp::refill(int slot, float* y) {
  const Acts& a = acts_.at(static_cast<size_t>(slot));
  activate(a);
  if (y != nullptr) project_out(a, y);
}

void GeluMlp::backward(int slot, const float* h, const float* dy, float* dh,
                       const PieceReport& report) {
  const Acts& a = acts_.at(static_cast<size_t>(slot));
  const int N = ctx_.N(), C = ctx_.config.d_model;
  auto& be = ctx_.be();
  auto& w = ctx_.w();
  // Row-parallel c_proj: its bias gradient is the full one on every rank.
  linear_backward_split(ctx_, d_act_, proj_w_, proj_b_, dy, a.gelu, H_local_, C);
  be.gelu_backward(d_fc_, a.fc, d_act_, static_cast<size_t>(N) * H_local_);
  // Column-parallel c_fc: its weight gradient first, so that data parallelism can reduce
  // the MLP's matrices while this rank computes d(h) (the same product as linear_backward's,
  // through gemm). Each TP rank has part of that; the allreduce sums.
  linear_backward_split(ctx_, nullptr, fc_w_, fc_b_, d_fc_, h, C, H_local_);
  report.ready();
  be.gemm(false, false, N, C, H_local_, 1.0f, d_fc_, H_local_, w.data(fc_w_), C, 0.0f, dh, C);
  ctx_.tp_sum_rows(dh);
}

double GeluMlp::macs_per_token(int /*seq_len*/) const {
  const double C = ctx_.config.d_model;
  return 8.0 * C * C;
}

}  // namespace trainctl::model
