#pragma once
// When the training loop's periodic actions fall due: evaluation and checkpoints. Pure
// bookkeeping (no I/O, no collectives), so each policy is unit-tested on its own. Steps
// are counts of completed optimizer steps (1-based, as logged).
#include <chrono>
#include <cstdint>

#include "train/run_options.h"

namespace trainctl::train {

// training.eval_every: every that many steps and after the last one (0: never).
bool eval_due(const TrainingOptions& training, int64_t step, bool last);

// checkpoint.every_steps and checkpoint.every_minutes, and which step was saved last.
class CheckpointCadence {
 public:
  using Clock = std::chrono::steady_clock;

  // `keeps_time`: this rank's clock decides time-based checkpoints (world rank 0 only: the
  // step's collective spreads its request, so every rank saves after the same step).
  CheckpointCadence(const CheckpointOptions& policy, bool keeps_time,
                    Clock::time_point now = Clock::now());

  // The run starts at `now` after `restored_step` completed steps: 0 from scratch, else a
  // checkpoint of that step exists already.
  void start(int64_t restored_step, Clock::time_point now);
  // Whether this rank asks for a checkpoint because every_minutes have passed since the
  // start or the last save.
  bool time_due(Clock::time_point now) const;
  // Whether to save after `step`: every_steps divides it, or a rank asked by time
  // (`requested`). Never after the last step (`last`): the final save covers that one.
  bool periodic_due(int64_t step, bool last, bool requested) const;
  // The run ended after `step`: whether it still needs a checkpoint of that step.
  bool final_due(int64_t step) const { return saved_step_ != step; }
  void saved(int64_t step, Clock::time_point now);

 private:
  CheckpointOptions policy_;
  bool keeps_time_;
  int64_t saved_step_ = -1;  // -1: none yet
  Clock::time_point saved_at_;
};

}  // namespace trainctl::train
