#pragma once
// ZeRO stages 1 and 2 for AdamW: the optimizer state is sharded over the DP group.
//
// Rank r owns the contiguous slice ShardLayout::begin(r)..end(r) of the flat parameter
// buffer and keeps AdamW's moments for it only (state_bytes() falls by ~dp). Each step:
//   1. gradients summed over DP: stage 1 expects the caller to have summed the whole
//      buffer already (plain DP, e.g. GradSync with its overlap); stage 2 reduce-scatters
//      the local gradients in reduce_gradients() and keeps only the owned shard of the
//      sum (the rest of the local gradient buffer is left unreduced and must not be used);
//   2. grad_norm(): the global norm of the summed gradient from every shard's sum of
//      squares, clip_grad_norm() scales the owned shard;
//   3. step(): AdamW on the owned slice (weight decay only on parameters marked for it;
//      a slice may cut through parameters), then the parameters are allgathered so every
//      rank holds the whole updated model.
// All three are collective over the DP group, in that order, on every rank.
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "model/parameters.h"
#include "ops/backend.h"
#include "optim/optimizer.h"
#include "parallel/buckets.h"
#include "parallel/comm_stats.h"
#include "parallel/shard_layout.h"

namespace trainctl::parallel {

class ZeroAdamW final : public optim::Optimizer {
 public:
  // stage is 1 or 2; options.type must be "adamw". Throws std::invalid_argument otherwise.
  // `master_shard`: the mixed-precision layout's fp32 master weights of this rank's shard
  // (parallel/mixed_params.h, same ShardLayout): step() updates them and leaves the
  // allgather to their owner. Null: the model's own fp32 parameters, allgathered here.
  ZeroAdamW(comm::Communicator& dp, model::ParameterSet& params, ops::Backend& backend,
            const optim::OptimizerOptions& options, int stage, float* master_shard = nullptr);
  ~ZeroAdamW() override;
  ZeroAdamW(const ZeroAdamW&) = delete;
  ZeroAdamW& operator=(const ZeroAdamW&) = delete;

  // Stage 2: reduce-scatter of the local gradient buffer; this rank's shard of the DP sum
  // is kept. Stage 1: nothing to do (the buffer is already summed). Starts a new step's
  // communication statistics.
  void reduce_gradients();
  // L2 norm of the whole DP-summed gradient (accumulated in double, equal on every rank).
  double grad_norm();
  // Sum of squares of the owned shard's summed gradient over the flat ranges `counted`
  // (model parallelism: entries another rank also holds are counted by one of them only).
  double local_grad_sumsq(const std::vector<FloatRange>& counted);
  // Scales the owned gradient shard so the global norm is at most max_norm (no-op when
  // max_norm <= 0 or the norm is within it); returns the factor applied.
  double clip_grad_norm(double norm, double max_norm);
  void scale_grads(double factor);  // the owned shard of the gradient *= factor
  // AdamW on the owned slice, then allgather of the parameters.
  void step(double lr) override;
  // AdamW's two moments for the owned shard.
  size_t state_bytes() const override;
  std::vector<std::string> state_names() const override { return {"exp_avg", "exp_avg_sq"}; }
  // Allgathers both moments over the DP group: the whole state, as unsharded AdamW's.
  optim::OptimizerState save_state() override;
  // Keeps the owned shard of a whole state.
  void load_state(const optim::OptimizerState& state) override;

  int stage() const { return stage_; }
  const ShardLayout& layout() const { return layout_; }
  int64_t shard_begin() const { return layout_.begin(dp_.rank()); }
  int64_t shard_end() const { return layout_.end(dp_.rank()); }
  // Communication since the last reduce_gradients() (all of it blocking: exposed).
  const StepCommStats& stats() const { return stats_; }

 private:
  template <class Fn>
  void timed(size_t wire_bytes, size_t sent_bytes, Fn&& fn);
  // The DP-summed gradient of the owned shard (shard_end - shard_begin floats).
  float* shard_grads();

  comm::Communicator& dp_;
  model::ParameterSet& params_;
  ops::Backend& backend_;
  optim::OptimizerOptions options_;
  int stage_;
  ShardLayout layout_;
  float* master_ = nullptr;  // see the constructor
  float* m_ = nullptr;       // moments of the owned shard
  float* v_ = nullptr;
  float* grad_shard_ = nullptr;  // stage 2: reduce-scatter output (backend memory)
  // Backend memory too (the collectives read it on the device; counted as tensor memory):
  float* send_shard_ = nullptr;  // allgather input (the updated owned shard, padded)
  float* padded_ = nullptr;      // padded copy of the whole buffer when total % dp != 0
  int t_ = 0;
  StepCommStats stats_;
};

}  // namespace trainctl::parallel
