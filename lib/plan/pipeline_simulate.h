#pragma once
// Runs every stage's instruction list together in simulated time, to measure a schedule
// (bubble, activation memory) and to prove it consistent: sends pair with receives in order,
// every backward follows its forward, and nothing deadlocks.
//
// The model: forward and backward take fixed costs; sends, receives and the optimizer step
// take no time. A send is asynchronous (it never waits) and delivers its message at the time
// it is issued; a receive waits for the matching message, identified (as the engine tags
// it) by sender, activation or gradient, micro-batch and receiving virtual stage, so
// receives need not come in the order of the sends. An op starts when its stage has
// finished the previous op and, for a receive, when the message has arrived.
//
// With V chunks per stage (V = the largest Instruction::chunk + 1 of all lists), chunk c of
// stage s is virtual stage c * num_stages + s, and one chunk's forward or backward costs the
// given cost / V, so that a stage's work per micro-batch stays forward + backward cost.
// The zero-bubble schedules' backward_input and backward_weight cost half a backward each.
#include <stdexcept>
#include <vector>

#include "parallel/pipeline_schedule.h"

namespace trainctl::parallel {

// An instruction list that cannot be executed: a send no one receives, the same message sent
// twice, a backward without its forward (per chunk and micro-batch), a forward of a
// (chunk, micro-batch) already in flight, a peer out of range or not holding the virtual
// stage next to the sender's.
class ScheduleError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

// No stage can progress: every unfinished stage waits on a receive whose send is never
// issued. The message names what each stuck stage waits for.
class DeadlockError : public ScheduleError {
 public:
  using ScheduleError::ScheduleError;
};

// One forward or backward as it ran.
struct ComputeSpan {
  OpKind kind;
  int micro_batch;
  double start;
  double end;
  int chunk = 0;
};

struct StageTimeline {
  std::vector<ComputeSpan> spans;  // in execution order
  double busy_time = 0;            // sum of the spans' durations
  // Most (chunk, micro-batch) pairs forwarded but not yet backwarded (for the zero-bubble
  // schedules: whose backward_weight has not run, W needing what the forward kept):
  // micro-batches for
  // V == 1; each pair holds one chunk's activations (1/V of the stage's layers) otherwise.
  int peak_activations = 0;
};

struct ScheduleStats {
  // Idle share of the stages' time from 0 to the end of the last compute op on any stage:
  // 1 - sum(busy) / (num_stages * makespan).
  double bubble_fraction = 0;
  int peak_activations = 0;  // the largest of the stages' peak_activations
};

struct Simulation {
  std::vector<StageTimeline> stages;
  int virtual_stages = 1;  // chunks per stage
  double makespan = 0;     // end of the last compute op
  ScheduleStats stats;
};

// Simulates arbitrary per-stage lists (lists[s] runs on stage s). Throws DeadlockError when
// no stage can progress, ScheduleError for the inconsistencies listed above.
// Costs must be positive.
Simulation simulate(const std::vector<std::vector<Instruction>>& lists, double forward_cost = 1,
                    double backward_cost = 2);

// Simulates make_all_schedules(kind, num_stages, num_micro_batches, virtual_stages).
Simulation simulate(ScheduleKind kind, int num_stages, int num_micro_batches,
                    double forward_cost = 1, double backward_cost = 2, int virtual_stages = 1);

}  // namespace trainctl::parallel
