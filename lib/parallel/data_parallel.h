#pragma once
// One object for everything data parallelism does around a GPT's training step: gradient
// buckets reduced during the backward pass (GradSync), the optimizer (plain, or ZeRO-1/2
// sharded AdamW), the global gradient norm and clipping, and communication statistics.
// With a DP group of one rank it is a plain optimizer step with no communication.
//
// Per optimizer step, on every rank of the DP group:
//   gpt.params().zero_grads();
//   dp.begin_step(step);
//   for (int m = 0; m < accum; ++m) {
//     dp.begin_micro_batch(m == accum - 1);
//     gpt.forward_backward(...);
//   }
//   dp.reduce_gradients();               // gradients now summed over DP (ZeRO-2: own shard)
//   ... the DP communicator is free again (e.g. to sum the loss) ...
//   const double norm = dp.grad_norm();  // of the summed gradient, same on every rank
//   dp.clip_grad_norm(norm, max_norm);
//   dp.step(lr);                         // every rank now holds the same updated model
//   dp.stats();                          // this step's communication time, exposed part
#include <cstdint>
#include <memory>

#include "comm/communicator.h"
#include "model/gpt.h"
#include "ops/backend.h"
#include "optim/optimizer.h"
#include "parallel/comm_stats.h"
#include "parallel/grad_sync.h"
#include "parallel/mixed_params.h"
#include "parallel/periodic_sync.h"
#include "parallel/zero3_optimizer.h"
#include "parallel/zero3_params.h"
#include "parallel/zero_optimizer.h"

namespace trainctl::parallel {

// With tensor or pipeline parallelism the global gradient norm spans ranks holding
// different parameters: each rank counts the entries in `counted` (its parameters, minus
// those another rank of its TP group or pipeline also holds), and the sums are added over
// `group` (the world).
struct NormScope {
  comm::Communicator* group = nullptr;  // null: the DP group holds the whole model
  std::vector<FloatRange> counted;      // flat ranges of the gradient buffer
  // World rank w belongs to DP replica (w / dp_stride) % dp (the rank map: dp_stride = tp).
  // dp_sync local_sgd/diloco sum each replica's norm over its own ranks only.
  int dp_stride = 1;
  // Expert parallelism: the routed experts' ranges (ParamSpec::expert), counted by the
  // first rank of `expert_dp` (the DP ranks holding the same experts); `counted` then
  // leaves them out.
  comm::Communicator* expert_dp = nullptr;
  std::vector<FloatRange> expert_counted;
  // This rank's place in its ep group is 0 (coord.dp % ep): under ZeRO its expert-DP group
  // counts the dense part.
  bool first_in_ep_group = true;
};

// The flat ranges of `params` this rank counts toward a model-parallel norm: split
// tensors always, replicated ones on TP rank 0 only, the LM head's copy of the tied
// embedding never. Adjacent ranges are merged. `skip_experts`: leave out the routed
// experts' tensors (expert parallelism counts them with expert_counted_ranges).
std::vector<FloatRange> norm_counted_ranges(const model::ParameterSet& params,
                                            bool skip_experts = false);
// The routed experts' tensors this rank counts toward the norm (same TP rule as above).
std::vector<FloatRange> expert_counted_ranges(const model::ParameterSet& params);

struct DataParallelOptions {
  // 0: replicated optimizer state; 1, 2: ZeRO (AdamW only); 3: parameters sharded too
  // (parallel/zero3_params.h; gpt built with GptOptions::unbound_params, dp >= 2).
  int zero_stage = 0;
  // Buckets and wire format of the overlapped reduction (plain DP and ZeRO-1; ZeRO-2
  // reduce-scatters the whole buffer in fp32 after the backward pass, with expert
  // parallelism after summing the dense parts over the ep group).
  GradSyncOptions sync;
  NormScope norm;
  // dp_sync local_sgd / diloco: no gradient reduction; each replica steps on its own
  // gradients and the replicas meet every sync_every steps (parallel/periodic_sync.h).
  PeriodicSyncOptions periodic = {};
  // Expert parallelism (sync.expert_dp set): the ranks that split the experts. ZeRO-2 sums
  // the dense gradients over it before its reduce-scatter over expert-DP.
  comm::Communicator* ep = nullptr;
  // bf16 / fp16: the mixed-precision layout (parallel/mixed_params.h): 16-bit weights,
  // fp32 gradients and fp32 master weights, sharded with the moments under ZeRO-1/2; gpt
  // built with GptOptions::grads_only. Not with ZeRO-3.
  DType weights = DType::fp32;
};

class DataParallel {
 public:
  // Connects gpt's grad-ready hook (cleared again by the destructor). `dp`, `gpt` and
  // `backend` must outlive this object. Throws std::invalid_argument for a ZeRO stage
  // other than 0-2 or ZeRO with an optimizer other than AdamW.
  DataParallel(comm::Communicator& dp, model::Gpt& gpt, ops::Backend& backend,
               const optim::OptimizerOptions& optimizer, const DataParallelOptions& options);
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  // Before the step's first forward pass (after gpt.params().zero_grads()) of optimizer
  // step `step` (0-based): ZeRO-3 zeroes its gradient shards; PowerSGD sends this step
  // uncompressed while it is inside its warm-up (PowerSgdOptions::warmup_steps).
  void begin_step(int64_t step);
  // Before each micro-batch's forward/backward; `last` for the step's final one.
  void begin_micro_batch(bool last);
  // After the step's last backward pass: waits for the overlapped buckets (rethrowing a
  // comm::CommError), or reduce-scatters for ZeRO-2. Starts this step's stats.
  void reduce_gradients();
  // Global L2 norm of the summed gradient (collective under ZeRO, and over the norm
  // scope's group with model parallelism). local_sgd/diloco: of this replica's gradient.
  double grad_norm();
  // Scales the gradient (or the owned shard) so its norm is at most max_norm, times
  // `unscale` in the same pass (fp16 loss scaling divides its scale back out with it; the
  // norm is then that of the unscaled gradient). Returns the clipping factor.
  double clip_grad_norm(double norm, double max_norm, double unscale = 1.0);
  // Optimizer update (under ZeRO followed by the parameter allgather).
  void step(double lr);
  // After step() of optimizer step `step` (1-based; `last`: the run's final step):
  // dp_sync local_sgd / diloco synchronise the replicas when due (collective over DP);
  // nothing otherwise.
  void after_update(int64_t step, bool last);
  // What each token's loss gradient is multiplied by beyond 1 / tokens-per-global-step:
  // dp for local_sgd/diloco, whose replicas step on their own share of the batch (its
  // mean gradient is dp times its part of the global sum), else 1.
  float local_grad_factor() const;
  // PowerSGD's state (null without grad_compression: powersgd or with one DP rank).
  PowerSgd* powersgd() { return sync_ ? sync_->powersgd() : nullptr; }
  // Periodic synchronisation (null for dp_sync: allreduce).
  PeriodicSync* periodic() { return periodic_.get(); }

  // Optimizer state held by this rank (falls by ~dp under ZeRO).
  size_t optimizer_state_bytes() const { return optimizer_->state_bytes(); }
  // The optimizer, for checkpoints (its save_state() is collective over DP under ZeRO).
  optim::Optimizer& optimizer() { return *optimizer_; }
  // Communication of the current step: gradient buckets plus ZeRO's collectives. Read it
  // after step().
  StepCommStats stats() const;
  int zero_stage() const { return zero_stage_; }
  // Null for ZeRO-2 and ZeRO-3 (no overlapped reduction).
  const GradSync* grad_sync() const { return sync_.get(); }
  // The sharded parameters under ZeRO-3 (initialisation, checkpoints, export), else null.
  Zero3Params* zero3() const { return zero3_.get(); }
  // The 16-bit weights and fp32 master of the mixed-precision layout (initialisation,
  // checkpoints, export), else null.
  MixedParams* mixed() const { return mixed_.get(); }

 private:
  double replica_grad_norm();

  comm::Communicator& dp_;
  model::Gpt& gpt_;
  ops::Backend& backend_;
  int zero_stage_;
  NormScope norm_;
  std::unique_ptr<GradSync> sync_;
  std::unique_ptr<MixedParams> mixed_;  // before the optimizer, which updates its master
  std::unique_ptr<optim::Optimizer> optimizer_;
  ZeroAdamW* zero_ = nullptr;  // optimizer_ when sharded
  std::unique_ptr<Zero3Params> zero3_;
  Zero3AdamW* zero3_adamw_ = nullptr;  // optimizer_ under ZeRO-3
  std::unique_ptr<PeriodicSync> periodic_;
  // ZeRO-2 with expert parallelism: the dense ranges' sum over the ep group before the
  // reduce-scatter over expert-DP.
  std::unique_ptr<GradReducer> dense_over_ep_;
  std::vector<FloatRange> dense_ranges_;
  StepCommStats dense_over_ep_stats_;
};

}  // namespace trainctl::parallel
