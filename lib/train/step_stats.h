#pragma once
// The metrics of one finished step, gathered from the engine: its outcome, timings,
// memory, and on logged steps the statistics that need the other ranks (data-parallel
// communication, pipeline idle time). Per-step figures are means over the logging window
// (the steps since the previous logged line: the timer's window, which this adds to).
#include <cstdint>

#include "train/engine.h"
#include "train/metrics.h"

namespace trainctl::train {

// `step`: 1-based. Called once for every step, logged or not: adds the step to
// timer.window() (which the caller restarts after a logged line). Leaves val_loss and
// tokens_per_s (measured after evaluation) unset. With `logged`, a collective over the DP
// group and the world: every rank calls it with the same `logged` on the same steps.
StepMetrics measure_step(Engine& e, const StepOutcome& out, int64_t step, StepTimer& timer,
                         bool logged);

}  // namespace trainctl::train
