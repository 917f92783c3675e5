#include "model/moe/moe_ffn.h"

namespace trainctl::model::moe {

MoeFfn::MoeFfn(const ModelContext& ctx, ParamList& params, const std::string& prefix)
    : ctx_(ctx),
      gate_(params.replicated(prefix + ".gate.weight",
                              {ctx.config.moe.num_experts, ctx.config.d_model}, Init::normal,
                              kInitStd, true)),
      routed_(ctx, params, prefix + ".experts", ctx.config.moe.num_experts),
      shared_(ctx, params, prefix + ".shared_experts", ctx.config.moe.shared_experts),
      max_rows_(int64_t{ctx.N()} * (ctx.config.moe.top_k + ctx.config.moe.shared_experts)) {
  first_ = gate_;
  end_ = params.size();
}

void MoeFfn::allocate(ActivationArena& arena, int slots) {
  const int64_t R = max_rows_, C = ctx_.config.d_model, W = routed_.fc_width();
  const int64_t H = routed_.hidden_local(), N = ctx_.N(), E = ctx_.config.moe.num_experts;
  const auto work = MemoryUse::workspace;
  x_ = arena.shared("ffn.moe.x", R * C, work);
  d_out_ = arena.shared("ffn.moe.d_out", R * C, work);
  d_act_ = arena.shared("ffn.moe.d_act", R * H, work);
  // Recomputed, the activation output lives in d_fc_ (as the dense MLPs do): backward reads
  // it for the output weights' gradients before activate_backward first writes d_fc_.
  d_fc_ = arena.shared("ffn.moe.d_fc", R * W, work);
  logits_ = arena.shared("ffn.moe.logits", N * E, work);
  dlogits_ = arena.shared("ffn.moe.dlogits", N * E, work);
  dgate_ = arena.shared("ffn.moe.dgate", N * ctx_.config.moe.top_k, work);
  const bool full = ctx_.recompute == Recompute::full;
  float* fc_shared = full ? arena.shared("ffn.moe.fc", R * W, MemoryUse::recompute) : nullptr;
  float* out_shared = full ? arena.shared("ffn.moe.out", R * C, MemoryUse::recompute) : nullptr;
  for (int s = 0; s < slots; ++s) {
    Acts a;
    a.fc = full ? fc_shared : arena.take(R * W, MemoryUse::activations);
    a.act = ctx_.recompute == Recompute::none ? arena.take(R * H, MemoryUse::activations) : d_fc_;
    a.out = full ? out_shared : arena.take(R * C, MemoryUse::activations);
    acts_.push_back(std::move(a));
  }
}

const int* MoeFfn::shared_offsets(const Routing& r) const {
  return r.offsets.data() + ctx_.config.moe.num_experts;
}

void MoeFfn::gather(const Routing& r, const float* h, float* x) const {
  const size_t C = static_cast<size_t>(ctx_.config.d_model);
  for (int p = 0; p < r.rows(); ++p) {
    const float* src = h + static_cast<size_t>(r.row_token[static_cast<size_t>(p)]) * C;
    std::copy(src, src + C, x + static_cast<size_t>(p) * C);
  }
}

void MoeFfn::project_and_combine(const Acts& a, float* y) {
  const Routing& r = a.routing;
  const size_t C = static_cast<size_t>(ctx_.config.d_model);
  routed_.project(r.offsets.data(), a.act, a.out);
  shared_.project(shared_offsets(r), a.act, a.out);
  std::fill(y, y + ctx_.NC(), 0.0f);
  for (int p = 0; p < r.rows(); ++p) {
    const int choice = r.row_choice[static_cast<size_t>(p)];
    const float g = choice >= 0 ? r.gate[static_cast<size_t>(choice)] : 1.0f;
    const float* o = a.out + static_cast<size_t>(p) * C;
    float* yt = y + static_cast<size_t>(r.row_token[static_cast<size_t>(p)]) * C;
    for (size_t c = 0; c < C; ++c) yt[c] += g * o[c];
  }
  ctx_.tp_sum_rows(y);
}

void MoeFfn::forward(int slot, const float* h, float* y) {
  Acts& a = acts_.at(static_cast<size_t>(slot));
  const int N = ctx_.N(), C = ctx_.config.d_model;
  const MoeConfig& cfg = ctx_.config.moe;
  // h is read whole (router, gather) before y, which may be h's buffer, is written.
  router_logits(h, ctx_.w().data(gate_), N, C, cfg.num_experts, logits_);
  route(logits_, N, cfg, a.routing);
  a.aux_scale = ctx_.grad_scale * static_cast<float>(ctx_.T);
  gather(a.routing, h, x_);
  routed_.fc_forward(a.routing.offsets.data(), x_, a.fc);
  shared_.fc_forward(shared_offsets(a.routing), x_, a.fc);
  routed_.activate(a.routing.rows(), a.fc, a.act);
  project_and_combine(a, y);
}

void MoeFfn::refill(int slot, float* y) {
  Acts& a = acts_.at(static_cast<size_t>(slot));
  routed_.activate(a.routing.rows(), a.fc, a.act);
  if (y != nullptr) project_and_combine(a, y);
}

void MoeFfn::backward(int slot, const float* h, const float* dy, float* dh,
                      const PieceReport& report) {
  const Acts& a = acts_.at(static_cast<size_t>(slot));
  const Routing& r = a.routing;
  const MoeConfig& cfg = ctx_.config.moe;
  const int N = ctx_.N(), C = ctx_.config.d_model, E = cfg.num_experts, rows = r.rows();
  const size_t Cs = static_cast<size_t>(C);
  gather(r, h, x_);
  // d(gate) = dy . expert output (TP-partial, summed below); d(out) = gate * dy.
  std::fill(dgate_, dgate_ + static_cast<size_t>(N) * cfg.top_k, 0.0f);
  for (int p = 0; p < rows; ++p) {
    const int choice = r.row_choice[static_cast<size_t>(p)];
    const float* dyt = dy + static_cast<size_t>(r.row_token[static_cast<size_t>(p)]) * Cs;
    const float* o = a.out + static_cast<size_t>(p) * Cs;
    float* d = d_out_ + static_cast<size_t>(p) * Cs;
    const float g = choice >= 0 ? r.gate[static_cast<size_t>(choice)] : 1.0f;
    float dot = 0.0f;
    for (size_t c = 0; c < Cs; ++c) {
      dot += dyt[c] * o[c];
      d[c] = g * dyt[c];
    }
    if (choice >= 0) dgate_[choice] = dot;
  }
  ctx_.tp_allreduce(dgate_, static_cast<size_t>(N) * cfg.top_k);
  routed_.backward_out(r.offsets.data(), d_out_, a.act, d_act_);
  shared_.backward_out(shared_offsets(r), d_out_, a.act, d_act_);
  routed_.activate_backward(rows, a.fc, d_act_, d_fc_);
  routed_.weight_grads_in(r.offsets.data(), d_fc_, x_);
  shared_.weight_grads_in(shared_offsets(r), d_fc_, x_);
  router_backward(r, dgate_, ctx_.T, a.aux_scale, cfg, dlogits_);
  router_weight_grad(dlogits_, h, N, C, E, ctx_.w().grad(gate_));
  report.ready();
  // d(h): the experts' part scattered back to the tokens and summed over the TP group,
  // then the router's (the same on every TP rank).
  routed_.input_grad(r.offsets.data(), d_fc_, d_out_);
  shared_.input_grad(shared_offsets(r), d_fc_, d_out_);
  std::fill(dh, dh + ctx_.NC(), 0.0f);
  for (int p = 0; p < rows; ++p) {
    const float* dx = d_out_ + static_cast<size_t>(p) * Cs;
    float* d = dh + static_cast<size_t>(r.row_token[static_cast<size_t>(p)]) * Cs;
    for (size_t c = 0; c < Cs; ++c) d[c] += dx[c];
  }
  ctx_.tp_sum_rows(dh);
  // Sequence parallel: dh holds this rank's rows only, so only their router part.
  const int first = ctx_.sp() ? ctx_.shard.tp_rank * ctx_.rows() : 0;
  router_input_grad(dlogits_ + static_cast<size_t>(first) * E, ctx_.w().data(gate_), ctx_.rows(), C,
                    E, dh);
}

double MoeFfn::macs_per_token(int /*seq_len*/) const {
  const MoeConfig& m = ctx_.config.moe;
  const double C = ctx_.config.d_model, H = m.expert_ffn_hidden;
  const double per_expert = (ctx_.config.llama() ? 3.0 : 2.0) * H * C;
  return m.num_experts * C + (m.top_k + m.shared_experts) * per_expert;
}

}  // namespace trainctl::model::moe
