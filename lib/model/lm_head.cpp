#include "model/lm_head.h"

#include "model/embedding.h"

namespace trainctl::model {

LmHead::LmHead(const ModelContext& ctx, ParamList& params, int token_table)
    : ctx_(ctx),
      norm_(ctx, params, ctx.config.llama() ? "model.norm" : "transformer.ln_f"),
      vocab_(Embedding::vocab_range(ctx.config, ctx.shard)),
      V_local_(ctx.config.vocab_size / ctx.tp_size()) {
  const ModelConfig& c = ctx.config;
  if (!c.tied()) {
    lm_head_ =
        params.split("lm_head.weight", {c.vocab_size, c.d_model}, Init::normal, kInitStd, true, 0);
  } else if (ctx.shard.tied_copy()) {
    ParamSpec copy = Embedding::token_table_spec(c, ctx.shard);
    copy.tied_copy = true;
    copy_ = params.add(std::move(copy));
  }
  weight_ = lm_head_ >= 0 ? lm_head_ : copy_ >= 0 ? copy_ : c.tied() ? token_table : -1;
}

void LmHead::allocate(ActivationArena& arena, int slots) {
  const int64_t N = ctx_.N(), NC = static_cast<int64_t>(ctx_.NC());
  norm_.allocate(arena);
  if (ctx_.sp()) dnorm_full_ = arena.shared("sp.full", NC, MemoryUse::workspace);
  if (ctx_.tp_size() > 1) {
    logits_ = arena.shared("head.logits", N * V_local_, MemoryUse::workspace);
    row_max_ = arena.shared("head.row_max", N, MemoryUse::workspace);
    xent_stats_ = arena.shared("head.xent_stats", 2 * N, MemoryUse::workspace);
  }
  for (int s = 0; s < slots; ++s) {
    Acts a;
    a.norm = norm_.take(arena, MemoryUse::activations);
    a.losses = arena.take(N, MemoryUse::activations);
    a.dnorm = arena.take(static_cast<int64_t>(ctx_.rows_C()), MemoryUse::activations);
    acts_.push_back(a);
  }
}

void LmHead::forward(int slot, const float* top, const int32_t* targets, bool backward,
                     float grad_scale, ChunkLoss* loss) {
  const Acts& a = acts_.at(static_cast<size_t>(slot));
  const int N = ctx_.N(), C = ctx_.config.d_model;
  auto& w = ctx_.w();
  norm_.forward(a.norm, top);
  if (ctx_.tp_size() == 1) {
    // The fused head writes d(norm output) and accumulates the head weight's gradient.
    ctx_.be().lm_head_cross_entropy(
        a.losses, backward ? a.dnorm : nullptr, backward ? w.grad(weight_) : nullptr, a.norm.out,
        w.data(weight_), targets, N, C, ctx_.config.vocab_size, grad_scale);
  } else {
    vocab_parallel_loss(a, targets, backward, grad_scale);
  }
  for (int i = 0; i < N; ++i) {
    if (targets[i] >= 0) {
      loss->sum += a.losses[i];
      ++loss->count;
    }
  }
}

void LmHead::vocab_parallel_loss(const Acts& a, const int32_t* targets, bool backward,
                                 float grad_scale) {
  const int N = ctx_.N(), C = ctx_.config.d_model;
  auto& be = ctx_.be();
  auto& w = ctx_.w();
  be.linear_forward(logits_, a.norm.out, w.data(weight_), nullptr, N, C, V_local_);
  be.xent_row_max(row_max_, logits_, N, V_local_);
  ctx_.tp_allreduce(row_max_, static_cast<size_t>(N), comm::ReduceOp::max);
  be.xent_partial_sums(xent_stats_, logits_, row_max_, targets, vocab_, N);
  ctx_.tp_allreduce(xent_stats_, 2 * static_cast<size_t>(N));
  be.xent_finish(a.losses, backward ? logits_ : nullptr, logits_, row_max_, xent_stats_, targets,
                 vocab_, N, grad_scale);
  if (!backward) return;
  // Each rank's share of d(norm output), summed over the TP group: all of it, or under
  // sequence parallelism this rank's rows (the norm's backward runs on those).
  float* dnorm = ctx_.sp() ? dnorm_full_ : a.dnorm;
  be.linear_backward(dnorm, w.grad(weight_), nullptr, logits_, a.norm.out, w.data(weight_), N, C,
                     V_local_);
  if (ctx_.sp()) {
    ctx_.sp_scatter_sum(dnorm, a.dnorm);
  } else {
    ctx_.tp_allreduce(a.dnorm, ctx_.NC());
  }
}

void LmHead::backward(int slot, const float* top, float* dtop) {
  const Acts& a = acts_.at(static_cast<size_t>(slot));
  norm_.backward(dtop, a.dnorm, top, a.norm);
}

}  // namespace trainctl::model
