#pragma once
// The pre-norm residual block both families use:
//   x1 = x + mixer(norm1(x));  out = x1 + ffn(norm2(x1))
// with any mixer and feed-forward Branch (model/block.h). The block owns the residual
// stream, the two norms, what recomputation does with them, and the order of the gradient
// pieces: the feed-forward's, norm2, the mixer's, norm1.
//
// Buffers shared by every block of the model: the branch output ("block.branch_out",
// [N,C], forward and refill only), d(branch input) and d(norm input) ([N,C] each, backward
// only). Under recomputation the dropped norm outputs live in them: norm2's in d(norm
// input) (backward reads it in the feed-forward's weight gradient before norm2's backward
// first writes that buffer), and under selective norm1's in the branch output (the mixer
// reads it before writing its output there; selective refills the mixer's output there
// before norm1's).
//
// Sequence parallelism (model/model_context.h): x, res1, res2 and the norms' statistics
// hold this rank's rows() rows; the norms all-gather their outputs for the branches, the
// branches reduce-scatter theirs, and backward all-gathers d(output) for each branch into
// the model's "sp.full" buffer ([N,C], workspace).
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model/block.h"
#include "model/norm.h"
#include "model/param_list.h"

namespace trainctl::model {

class TransformerBlock final : public Block {
 public:
  using MakeBranch = std::function<std::unique_ptr<Branch>(ParamList&)>;
  // Declares, in this order: `prefix` + norm1 name, the mixer, `prefix` + norm2 name, the
  // feed-forward (the factories declare theirs).
  TransformerBlock(const ModelContext& ctx, ParamList& params, const std::string& prefix,
                   const std::string& norm1, const MakeBranch& mixer, const std::string& norm2,
                   const MakeBranch& ffn);

  std::pair<int, int> param_range() const override;
  std::vector<int> piece_starts() const override;
  void allocate(ActivationArena& arena, int slots) override;
  const float* forward(int slot, const float* x) override;
  const float* output(int slot) const override;
  void recompute(int slot, const float* x) override;
  void backward(int slot, const float* x, float* dres, const PieceReport& report) override;
  double macs_per_token(int seq_len) const override;
  Branch* feed_forward() override { return ffn_.get(); }

 private:
  struct Acts {
    NormActs n1;
    float* res1;  // [N,C] the residual stream after the mixer
    NormActs n2;
    float* res2;  // [N,C] the block output: always kept (in 16 bits, a working buffer the
                  // model unpacks before the next block's backward reads it)
  };
  // `output`: also write res2 (not when recomputing: it may still be on its way to the
  // next pipeline stage).
  void run_forward(Acts& a, int slot, const float* x, bool output);
  // d(branch output) as the branch reads it: dres, or all of its rows gathered.
  const float* branch_grad(const float* dres);

  const ModelContext& ctx_;
  Norm norm1_;
  std::unique_ptr<Branch> mixer_;
  Norm norm2_;
  std::unique_ptr<Branch> ffn_;
  int ffn_pieces_, mixer_pieces_;  // gradient pieces of each branch
  std::vector<Acts> acts_;         // per slot
  float *branch_out_ = nullptr, *d_branch_ = nullptr, *d_norm_ = nullptr;
  float* d_out_ = nullptr;  // sequence parallel: d(branch output) gathered [N,C]
};

}  // namespace trainctl::model
