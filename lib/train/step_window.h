#pragma once
// The steps since the previous logged metrics line (the logging window), summed as they
// finish, so that a logged line shows what happened over its window rather than at its
// last step alone: under local SGD with sync_every 4, a step sends either nothing or the
// whole model, and a line every 10 steps must not alternate between the two.
#include <cstdint>

namespace trainctl::train {

// One finished step's per-step figures, as this rank measured them.
struct StepSample {
  double step_ms = 0.0;          // the step's wall-clock time
  double comm_s = 0.0;           // time in DP collectives (parallel/comm_stats.h)
  double exposed_s = 0.0;        // the part of it the training thread waited for
  double pipeline_idle_s = 0.0;  // the wait for pipeline neighbours
  int64_t sent_bytes = 0;        // DP exchange bytes (comm_stats.h's ring model)
};

class StepWindow {
 public:
  void add(const StepSample& s);
  int64_t steps() const { return steps_; }
  const StepSample& total() const { return total_; }
  // Per-step means over the window; bytes rounded to a whole number. Zeros when empty.
  StepSample mean() const;
  void restart() { *this = StepWindow(); }

 private:
  StepSample total_;
  int64_t steps_ = 0;
};

// `total` spread evenly over `steps` steps, rounded to the nearest whole number (0 for no
// step): a window's bytes per step.
int64_t per_step_mean(int64_t total, int64_t steps);

}  // namespace trainctl::train
