#pragma once
// Periodic synchronisation of data-parallel replicas (`parallel.dp_sync`): instead of
// summing gradients every step, each replica takes optimizer steps on its own gradients
// and the replicas meet every H = sync_every steps.
//
//   local_sgd (Stich 2019; Lin et al. 2020): the replicas' parameters are averaged.
//   diloco (Douillard et al. 2023): the inner optimizer (optimizer.*, AdamW) runs per
//     replica; at a meeting, the outer gradient Δ = θ_global − mean_r θ_r (the averaged
//     parameter change since the last meeting) takes one SGD step with Nesterov momentum,
//       m ← μ m + Δ;  θ_global ← θ_global − η (Δ + μ m)     (η = outer_lr, μ = outer_momentum)
//     and every replica continues from θ_global. The inner optimizer's state stays local.
//
// Communication falls from one gradient allreduce per step to one parameter allreduce
// per H steps. Everything here is per-rank over the DP group, so it composes with tensor
// and pipeline parallelism: DP peers hold the same shard of the model.
//
// Exactness: local_sgd with H = 1 and plain SGD is synchronous data parallelism (averaging
// after the update equals updating with the averaged gradient, momentum and weight decay
// included: both are linear), up to float rounding; diloco with outer_lr 1 and
// outer_momentum 0 is local_sgd. tests/unit/test_parallel_periodic_sync.cpp checks both.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "comm/communicator.h"
#include "model/parameters.h"
#include "ops/backend.h"
#include "parallel/comm_stats.h"

namespace trainctl::parallel {

enum class DpSyncMode { allreduce, local_sgd, diloco };

std::string_view to_string(DpSyncMode mode);
// "allreduce", "local_sgd", "diloco"; throws std::invalid_argument naming the choices.
DpSyncMode parse_dp_sync_mode(std::string_view name);

struct PeriodicSyncOptions {
  DpSyncMode mode = DpSyncMode::allreduce;
  int sync_every = 1;  // H >= 1
  // Tuned for small H (tens of steps); Douillard et al.'s 0.7 / 0.9 suit H ~ 500.
  double outer_lr = 0.9;
  double outer_momentum = 0.3;
};

// A flat buffer laid out like the ParameterSet (params.total() floats) that a DP mode keeps
// beside the optimizer's state; checkpoints store it per parameter as "optim.<name>.<param>"
// so it reshards with the parameters.
struct FlatState {
  std::string name;
  std::vector<float> values;
};

class PeriodicSync {
 public:
  // mode must be local_sgd or diloco; sync_every >= 1. Throws std::invalid_argument
  // otherwise. `dp`, `params` and `backend` must outlive this object. DiLoCo's outer state
  // starts from the parameters as they are now (call reset_outer() after loading others).
  // `weights`: the fp32 values replicas average, laid out like the flat buffer; null: the
  // set's own (the mixed-precision layout passes its master, parallel/mixed_params.h).
  PeriodicSync(comm::Communicator& dp, model::ParameterSet& params, ops::Backend& backend,
               const PeriodicSyncOptions& options, float* weights = nullptr);
  ~PeriodicSync();
  PeriodicSync(const PeriodicSync&) = delete;
  PeriodicSync& operator=(const PeriodicSync&) = delete;

  // Whether the replicas meet after `step` completed optimizer steps (1-based): every
  // sync_every steps, and after the last one (`last`) so the run ends with one model.
  bool due(int64_t step, bool last) const;
  // After this replica's optimizer update of `step`: synchronises when due(). Collective
  // over the DP group (every rank calls it on every step). Returns whether it synchronised.
  bool after_update(int64_t step, bool last);

  // Communication of the last after_update() (zero on steps without a meeting).
  const StepCommStats& stats() const { return stats_; }
  const PeriodicSyncOptions& options() const { return options_; }

  // DiLoCo's outer state ("outer_params": θ_global, "outer_momentum"), the same on every
  // replica; empty for local SGD.
  std::vector<FlatState> save_outer() const;
  std::vector<std::string> outer_state_names() const;
  // Restores states saved by save_outer() (same names and sizes); throws
  // std::invalid_argument otherwise.
  void load_outer(const std::vector<FlatState>& states);
  // DiLoCo: θ_global ← the current parameters, momentum ← 0 (a resume that found no outer
  // state in its checkpoint).
  void reset_outer();

 private:
  void average_parameters();
  void outer_step();

  comm::Communicator& dp_;
  model::ParameterSet& params_;
  float* w_;  // the weights averaged (see the constructor)
  ops::Backend& backend_;
  PeriodicSyncOptions options_;
  std::vector<float> global_;    // DiLoCo: θ_global
  std::vector<float> momentum_;  // DiLoCo: outer momentum
  std::vector<float> delta_;     // DiLoCo: scratch for the outer gradient
  StepCommStats stats_;
};

}  // namespace trainctl::parallel
