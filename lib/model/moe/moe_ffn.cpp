#include "model/moe/moe_ffn.h"

#include <algorithm>
#include <stdexcept>

namespace trainctl::model::moe {

namespace {
int local_experts(const ModelContext& ctx) {
  return ctx.config.moe.num_experts / ctx.shard.ep_size;
}
}  // namespace

MoeFfn::MoeFfn(const ModelContext& ctx, ParamList& params, const std::string& prefix)
    : ctx_(ctx),
      gate_(params.replicated(prefix + ".gate.weight",
                              {ctx.config.moe.num_experts, ctx.config.d_model}, Init::normal,
                              kInitStd, true)),
      routed_(ctx, params, prefix + ".experts", local_experts(ctx),
              ctx.shard.ep_rank * local_experts(ctx), true),
      shared_(ctx, params, prefix + ".shared_experts", ctx.config.moe.shared_experts),
      max_rows_(int64_t{ctx.N()} * (ctx.config.moe.top_k + ctx.config.moe.shared_experts)),
      max_expert_rows_(int64_t{ctx.N()} * (int64_t{ctx.shard.ep_size} * ctx.config.moe.top_k +
                                           ctx.config.moe.shared_experts)),
      bias_name_(prefix + ".gate.e_score_correction_bias") {
  const MoeConfig& m = ctx.config.moe;
  if (m.expert_bias()) bias_.assign(static_cast<size_t>(m.num_experts), 0.0f);
  stats_.counts.assign(static_cast<size_t>(m.num_experts), 0);
  first_ = gate_;
  end_ = params.size();
  if (expert_parallel() && ctx.ep != nullptr) {
    if (ctx.ep->size() != ctx.shard.ep_size) {
      throw std::invalid_argument("MoeFfn: the ep group has " + std::to_string(ctx.ep->size()) +
                                  " ranks, the shard expects " + std::to_string(ctx.shard.ep_size));
    }
    dispatch_ = std::make_unique<ExpertDispatch>(*ctx.ep, ctx.config.moe.num_experts);
  }
}

void MoeFfn::allocate(ActivationArena& arena, int slots) {
  const int64_t R = max_rows_, Re = max_expert_rows_, C = ctx_.config.d_model;
  const int64_t W = routed_.fc_width(), H = routed_.hidden_local(), N = ctx_.N();
  const int64_t E = ctx_.config.moe.num_experts;
  const auto work = MemoryUse::workspace;
  const bool ep = expert_parallel();
  x_ = arena.shared("ffn.moe.x", Re * C, work);
  d_out_ = arena.shared("ffn.moe.d_out", R * C, work);
  d_act_ = arena.shared("ffn.moe.d_act", Re * H, work);
  // Recomputed, the activation output lives in d_fc_ (as the dense MLPs do): backward reads
  // it for the output weights' gradients before activate_backward first writes d_fc_.
  d_fc_ = arena.shared("ffn.moe.d_fc", Re * W, work);
  logits_ = arena.shared("ffn.moe.logits", N * E, work);
  dlogits_ = arena.shared("ffn.moe.dlogits", N * E, work);
  dgate_ = arena.shared("ffn.moe.dgate", N * ctx_.config.moe.top_k, work);
  if (ep) staging_ = arena.shared("ffn.moe.ep_staging", Re * C, work);
  const bool full = ctx_.recompute == Recompute::full;
  const auto rec = MemoryUse::recompute, acts = MemoryUse::activations;
  float* fc_shared = full ? arena.shared("ffn.moe.fc", Re * W, rec) : nullptr;
  float* out_shared = full ? arena.shared("ffn.moe.out", Re * C, rec) : nullptr;
  float* x_shared = full && ep ? arena.shared("ffn.moe.ep_x", Re * C, rec) : nullptr;
  const int64_t routed_local = N * ctx_.config.moe.top_k;
  float* back_shared =
      full && ep ? arena.shared("ffn.moe.ep_back", routed_local * C, rec) : nullptr;
  for (int s = 0; s < slots; ++s) {
    Acts a;
    a.fc = full ? fc_shared : arena.take(Re * W, acts);
    a.act = ctx_.recompute == Recompute::none ? arena.take(Re * H, acts) : d_fc_;
    a.out = full ? out_shared : arena.take(Re * C, acts);
    if (ep) {
      a.x = full ? x_shared : arena.take(Re * C, acts);
      a.back = full ? back_shared : arena.take(routed_local * C, acts);
    }
    acts_.push_back(std::move(a));
  }
}

void MoeFfn::gather(const Routing& r, const float* h, float* x) const {
  const size_t C = static_cast<size_t>(ctx_.config.d_model);
  for (int p = 0; p < r.rows(); ++p) {
    const float* src = h + static_cast<size_t>(r.row_token[static_cast<size_t>(p)]) * C;
    std::copy(src, src + C, x + static_cast<size_t>(p) * C);
  }
}

void MoeFfn::to_expert_side(Acts& a, const float* x_local) {
  const Routing& r = a.routing;
  const int E = ctx_.config.moe.num_experts, S = ctx_.config.moe.shared_experts;
  if (!expert_parallel()) {
    a.offsets = r.offsets;
    a.routed_rows = r.offsets[static_cast<size_t>(E)];
    return;
  }
  if (!dispatch_) throw std::logic_error("MoeFfn: expert parallelism without an ep group");
  dispatch_->make_plan(r.offsets.data(), a.plan);
  a.routed_rows = a.plan.received();
  a.offsets = a.plan.local_offsets;
  const int routed_local = r.offsets[static_cast<size_t>(E)];
  for (int i = 0; i < S; ++i) {
    a.offsets.push_back(a.routed_rows + r.offsets[static_cast<size_t>(E + i + 1)] - routed_local);
  }
  local_to_experts(a, x_local, a.x);
}

void MoeFfn::local_to_experts(const Acts& a, const float* from, float* to) {
  const Routing& r = a.routing;
  const size_t C = static_cast<size_t>(ctx_.config.d_model);
  const size_t routed =
      static_cast<size_t>(r.offsets[static_cast<size_t>(ctx_.config.moe.num_experts)]);
  dispatch_->dispatch(a.plan, from, to, staging_, ctx_.config.d_model);
  // Shared experts run here, on this rank's own tokens.
  std::copy(from + routed * C, from + static_cast<size_t>(r.rows()) * C,
            to + static_cast<size_t>(a.routed_rows) * C);
}

void MoeFfn::experts_to_local(const Acts& a, const float* from, float* to) {
  const Routing& r = a.routing;
  const size_t C = static_cast<size_t>(ctx_.config.d_model);
  const size_t routed =
      static_cast<size_t>(r.offsets[static_cast<size_t>(ctx_.config.moe.num_experts)]);
  dispatch_->combine(a.plan, from, to, staging_, ctx_.config.d_model);
  const float* shared = from + static_cast<size_t>(a.routed_rows) * C;
  std::copy(shared, shared + (static_cast<size_t>(r.rows()) - routed) * C, to + routed * C);
}

const float* MoeFfn::output_row(const Acts& a, int p) const {
  const size_t C = static_cast<size_t>(ctx_.config.d_model);
  const int routed = a.routing.offsets[static_cast<size_t>(ctx_.config.moe.num_experts)];
  if (p < routed) return (expert_parallel() ? a.back : a.out) + static_cast<size_t>(p) * C;
  return a.out + static_cast<size_t>(p - routed + a.routed_rows) * C;
}

void MoeFfn::project_and_combine(const Acts& a, float* y) {
  const Routing& r = a.routing;
  const size_t C = static_cast<size_t>(ctx_.config.d_model);
  const int* eo = a.offsets.data();
  routed_.project(eo, a.act, a.out);
  shared_.project(eo + routed_.count(), a.act, a.out);
  if (expert_parallel()) dispatch_->combine(a.plan, a.out, a.back, staging_, ctx_.config.d_model);
  std::fill(y, y + ctx_.NC(), 0.0f);
  for (int p = 0; p < r.rows(); ++p) {
    const int choice = r.row_choice[static_cast<size_t>(p)];
    const float g = choice >= 0 ? r.gate[static_cast<size_t>(choice)] : 1.0f;
    const float* o = output_row(a, p);
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
  route(logits_, N, cfg, a.routing, bias_.empty() ? nullptr : bias_.data());
  // Per whole sequence (ctx_.T is this rank's share of it under context parallelism).
  a.aux_scale = ctx_.grad_scale * static_cast<float>(ctx_.T * ctx_.cp.cp);
  gather(a.routing, h, x_);
  to_expert_side(a, x_);
  const float* xe = expert_parallel() ? a.x : x_;
  const int* eo = a.offsets.data();
  routed_.fc_forward(eo, xe, a.fc);
  shared_.fc_forward(eo + routed_.count(), xe, a.fc);
  routed_.activate(a.offsets.back(), a.fc, a.act);
  project_and_combine(a, y);
}

void MoeFfn::refill(int slot, float* y) {
  Acts& a = acts_.at(static_cast<size_t>(slot));
  routed_.activate(a.offsets.back(), a.fc, a.act);
  if (y != nullptr) project_and_combine(a, y);
}

void MoeFfn::backward(int slot, const float* h, const float* dy, float* dh,
                      const PieceReport& report) {
  const Acts& a = acts_.at(static_cast<size_t>(slot));
  const Routing& r = a.routing;
  const MoeConfig& cfg = ctx_.config.moe;
  const int N = ctx_.N(), C = ctx_.config.d_model, E = cfg.num_experts, rows = r.rows();
  const size_t Cs = static_cast<size_t>(C);
  const bool ep = expert_parallel();
  if (!ep) gather(r, h, x_);
  const float* xe = ep ? a.x : x_;
  // d(gate) = dy . expert output (TP-partial, summed below); d(out) = gate * dy.
  std::fill(dgate_, dgate_ + static_cast<size_t>(N) * cfg.top_k, 0.0f);
  for (int p = 0; p < rows; ++p) {
    const int choice = r.row_choice[static_cast<size_t>(p)];
    const float* dyt = dy + static_cast<size_t>(r.row_token[static_cast<size_t>(p)]) * Cs;
    const float* o = output_row(a, p);
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
  // Expert side of d(out): ep sends each row's to its expert (x_ is free: a.x holds x).
  float* de = d_out_;
  if (ep) {
    local_to_experts(a, d_out_, x_);
    de = x_;
  }
  const int* eo = a.offsets.data();
  const int* so = eo + routed_.count();
  routed_.backward_out(eo, de, a.act, d_act_);
  shared_.backward_out(so, de, a.act, d_act_);
  routed_.activate_backward(a.offsets.back(), a.fc, d_act_, d_fc_);
  routed_.weight_grads_in(eo, d_fc_, xe);
  shared_.weight_grads_in(so, d_fc_, xe);
  count_assignments(r, E, stats_.counts.data());
  stats_.dropped += r.dropped;
  SequenceLoads loads;
  if (cfg.aux_loss_coef > 0) {
    // Context parallelism: the other tokens of these sequences are on the other CP ranks,
    // which run this layer's backward in the same order (ring attention pairs them too).
    CountSum cp_sum;
    if (ctx_.cp.active()) {
      cp_sum = [this](float* counts, size_t n) { ctx_.cp_ring->allreduce_sum(counts, n); };
    }
    loads = sequence_loads(r, ctx_.T, ctx_.T * ctx_.cp.cp, cfg, cp_sum);
    stats_.aux_sum += aux_loss_sum(r, loads, cfg);
  }
  router_backward(r, dgate_, cfg.aux_loss_coef > 0 ? &loads : nullptr, a.aux_scale, cfg, dlogits_);
  router_weight_grad(dlogits_, h, N, C, E, ctx_.w().grad(gate_));
  report.ready();
  // d(h): the experts' part (ep: back from the experts' ranks) scattered back to the tokens
  // and summed over the TP group, then the router's (the same on every TP rank).
  routed_.input_grad(eo, d_fc_, de);
  shared_.input_grad(so, d_fc_, de);
  if (ep) experts_to_local(a, de, d_out_);
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

MoeFfn::StepStats MoeFfn::take_step_stats() {
  StepStats out = stats_;
  std::fill(stats_.counts.begin(), stats_.counts.end(), 0);
  stats_.dropped = 0;
  stats_.aux_sum = 0;
  return out;
}

double MoeFfn::macs_per_token(int /*seq_len*/) const {
  const MoeConfig& m = ctx_.config.moe;
  const double C = ctx_.config.d_model, H = m.expert_ffn_hidden;
  const double per_expert = (ctx_.config.llama() ? 3.0 : 2.0) * H * C;
  return m.num_experts * C + (m.top_k + m.shared_experts) * per_expert;
}

}  // namespace trainctl::model::moe
