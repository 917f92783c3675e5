#include "model/transformer_block.h"

namespace trainctl::model {

TransformerBlock::TransformerBlock(const ModelContext& ctx, ParamList& params,
                                   const std::string& prefix, const std::string& norm1,
                                   const MakeBranch& mixer, const std::string& norm2,
                                   const MakeBranch& ffn)
    : ctx_(ctx),
      norm1_(ctx, params, prefix + norm1),
      mixer_(mixer(params)),
      norm2_(ctx, params, prefix + norm2),
      ffn_(ffn(params)),
      ffn_pieces_(static_cast<int>(ffn_->piece_starts().size())),
      mixer_pieces_(static_cast<int>(mixer_->piece_starts().size())) {}

std::pair<int, int> TransformerBlock::param_range() const {
  return {norm1_.first_param(), ffn_->end_param()};
}

std::vector<int> TransformerBlock::piece_starts() const {
  std::vector<int> out = ffn_->piece_starts();
  out.push_back(norm2_.first_param());
  for (int p : mixer_->piece_starts()) out.push_back(p);
  out.push_back(norm1_.first_param());
  return out;
}

void TransformerBlock::allocate(ActivationArena& arena, int slots) {
  // Under sequence parallelism the residual stream and the norms' statistics hold rows()
  // rows; the branches' inputs (the norms' gathered outputs) and scratch all N.
  const int64_t N = ctx_.rows(), NC = static_cast<int64_t>(ctx_.NC());
  const int64_t RC = static_cast<int64_t>(ctx_.rows_C());
  if (ctx_.sp()) d_out_ = arena.shared("sp.full", NC, MemoryUse::workspace);
  norm1_.allocate(arena);
  norm2_.allocate(arena);
  d_branch_ = arena.shared("block.d_branch", NC, MemoryUse::workspace);
  d_norm_ = arena.shared("block.d_norm", NC, MemoryUse::workspace);
  branch_out_ = arena.shared("block.branch_out", NC, MemoryUse::workspace);
  mixer_->allocate(arena, slots);
  ffn_->allocate(arena, slots);
  const Recompute mode = ctx_.recompute;
  Acts dropped{};  // what recomputation drops: one set for the model, refilled block by block
  if (mode != Recompute::none) {
    const auto use = MemoryUse::recompute;
    dropped.n1.out = mode == Recompute::full ? arena.shared("block.norm1", NC, use) : branch_out_;
    dropped.n1.mean = arena.shared("block.norm1.mean", N, use);
    dropped.n1.rstd = arena.shared("block.norm1.rstd", N, use);
    dropped.res1 = arena.shared("block.res1", RC, use);
    dropped.n2.out = d_norm_;
    dropped.n2.mean = arena.shared("block.norm2.mean", N, use);
    dropped.n2.rstd = arena.shared("block.norm2.rstd", N, use);
  }
  for (int s = 0; s < slots; ++s) {
    Acts a = dropped;
    if (mode == Recompute::none) {
      a.n1 = norm1_.keep(arena, "block.norm1", s);
      a.res1 = arena.keep("block.res1", RC, s);
      a.n2 = norm2_.keep(arena, "block.norm2", s);
    }
    // The block output: the next block's input (ActivationArena::keep_output).
    a.res2 = arena.keep_output(RC, s);
    acts_.push_back(a);
  }
}

void TransformerBlock::run_forward(Acts& a, int slot, const float* x, bool output) {
  auto& be = ctx_.be();
  const size_t NC = ctx_.rows_C();
  norm1_.forward(a.n1, x);
  mixer_->forward(slot, a.n1.out, branch_out_);
  be.add(a.res1, x, branch_out_, NC);
  ctx_.round_kept(a.res1, NC);
  norm2_.forward(a.n2, a.res1);
  ffn_->forward(slot, a.n2.out, branch_out_);
  if (output) {
    be.add(a.res2, a.res1, branch_out_, NC);
    ctx_.round_kept(a.res2, NC);
  }
}

const float* TransformerBlock::forward(int slot, const float* x) {
  Acts& a = acts_.at(static_cast<size_t>(slot));
  run_forward(a, slot, x, true);
  return a.res2;
}

const float* TransformerBlock::output(int slot) const {
  return acts_.at(static_cast<size_t>(slot)).res2;
}

void TransformerBlock::recompute(int slot, const float* x) {
  Acts& a = acts_.at(static_cast<size_t>(slot));
  switch (ctx_.recompute) {
    case Recompute::none:
      return;
    case Recompute::selective:
      // The same calls on the same inputs as forward: the same bits. The mixer's output goes
      // to branch_out_ before norm1 reuses that buffer.
      mixer_->refill(slot, branch_out_);
      ctx_.be().add(a.res1, x, branch_out_, ctx_.rows_C());
      ctx_.round_kept(a.res1, ctx_.rows_C());
      norm1_.forward(a.n1, x);
      norm2_.forward(a.n2, a.res1);
      ffn_->refill(slot, nullptr);
      return;
    case Recompute::full:
      run_forward(a, slot, x, false);
      return;
  }
}

void TransformerBlock::backward(int slot, const float* x, float* dres, const PieceReport& report) {
  const Acts& a = acts_.at(static_cast<size_t>(slot));
  const size_t NC = ctx_.rows_C();
  ffn_->backward(slot, a.n2.out, branch_grad(dres), d_branch_, report);
  norm2_.backward(d_norm_, d_branch_, a.res1, a.n2);
  report.ready(ffn_pieces_);
  ctx_.be().add_inplace(dres, d_norm_, NC);
  mixer_->backward(slot, a.n1.out, branch_grad(dres), d_branch_, report.from(ffn_pieces_ + 1));
  norm1_.backward(d_norm_, d_branch_, x, a.n1);
  report.ready(ffn_pieces_ + 1 + mixer_pieces_);
  ctx_.be().add_inplace(dres, d_norm_, NC);
}

const float* TransformerBlock::branch_grad(const float* dres) {
  if (!ctx_.sp()) return dres;
  // The backward of the reduce-scatter that ended the branch's forward.
  ctx_.sp_gather(dres, d_out_);
  return d_out_;
}

double TransformerBlock::macs_per_token(int seq_len) const {
  return mixer_->macs_per_token(seq_len) + ffn_->macs_per_token(seq_len);
}

}  // namespace trainctl::model
