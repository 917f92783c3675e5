#pragma once
// AdamW on the shards of ZeRO-3 (parallel/zero3_params.h): this rank's moments cover only
// its shard of every unit, the update reads the DP-summed gradient shard and writes the
// parameter shard, then Zero3Params::refresh() regathers the resident units (blocks are
// gathered again by their next forward). Weight decay follows the parameters a shard
// cuts through, as in unsharded AdamW, so dp = N reproduces dp = 1.
#include <vector>

#include "comm/communicator.h"
#include "model/parameters.h"
#include "ops/backend.h"
#include "optim/optimizer.h"
#include "parallel/buckets.h"
#include "parallel/zero3_params.h"

namespace trainctl::parallel {

class Zero3AdamW final : public optim::Optimizer {
 public:
  // options.type must be "adamw"; throws std::invalid_argument otherwise.
  Zero3AdamW(Zero3Params& zero3, const model::ParameterSet& params, ops::Backend& backend,
             const optim::OptimizerOptions& options);
  ~Zero3AdamW() override;
  Zero3AdamW(const Zero3AdamW&) = delete;
  Zero3AdamW& operator=(const Zero3AdamW&) = delete;

  // Sum of squares of the gradient shard over the flat ranges `counted` (all of it when
  // empty).
  double local_grad_sumsq(const std::vector<FloatRange>& counted) const;
  void scale_grads(double factor);
  void step(double lr) override;
  size_t state_bytes() const override;
  std::vector<std::string> state_names() const override { return {"exp_avg", "exp_avg_sq"}; }
  // Collective over DP: the whole moments, as unsharded AdamW's.
  optim::OptimizerState save_state() override;
  void load_state(const optim::OptimizerState& state) override;

 private:
  struct Segment {  // one parameter's overlap with the shard
    int64_t pos, count;
    bool decay;
  };
  Zero3Params& zero3_;
  const model::ParameterSet& params_;
  ops::Backend& backend_;
  optim::OptimizerOptions options_;
  std::vector<Segment> segments_;
  float* m_ = nullptr;
  float* v_ = nullptr;
  int t_ = 0;
};

}  // namespace trainctl::parallel
