#include "train/cadence.h"

namespace trainctl::train {

bool eval_due(const TrainingOptions& training, int64_t step, bool last) {
  return training.eval_every > 0 && (step % training.eval_every == 0 || last);
}

CheckpointCadence::CheckpointCadence(const CheckpointOptions& policy, bool keeps_time,
                                     Clock::time_point now)
    : policy_(policy), keeps_time_(keeps_time), saved_at_(now) {}

void CheckpointCadence::start(int64_t restored_step, Clock::time_point now) {
  saved_step_ = restored_step > 0 ? restored_step : -1;
  saved_at_ = now;
}

bool CheckpointCadence::time_due(Clock::time_point now) const {
  return keeps_time_ && policy_.every_minutes > 0 &&
         std::chrono::duration<double>(now - saved_at_).count() >= policy_.every_minutes * 60;
}

bool CheckpointCadence::periodic_due(int64_t step, bool last, bool requested) const {
  if (last) return false;
  return (policy_.every_steps > 0 && step % policy_.every_steps == 0) || requested;
}

void CheckpointCadence::saved(int64_t step, Clock::time_point now) {
  saved_step_ = step;
  saved_at_ = now;
}

}  // namespace trainctl::train
