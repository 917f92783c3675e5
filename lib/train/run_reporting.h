#pragma once
// What both training loops (synchronous, train/trainer.cpp; parameter servers,
// train/ps_training.cpp) tell the user: the opening lines, the metrics reporter (global
// rank 0's console and metrics.jsonl), TensorBoard, and the per-step report.
#include <functional>
#include <memory>
#include <string>

#include "comm/process_groups.h"
#include "observe/mlflow_tracker.h"
#include "observe/tensorboard_writer.h"
#include "train/engine.h"
#include "train/metrics.h"
#include "train/run_options.h"
#include "train/trainer.h"

namespace trainctl::train {

// The model, shard, data and batch lines (this rank's log) and the run's opening line
// (rank 0's console).
void announce(const Engine& e, MetricsReporter& reporter);

// Only rank 0's reporter has a console and writes metrics.jsonl.
MetricsReporter make_reporter(const ObservabilityOptions& options,
                              const comm::ProcessGroups& groups, const TrainContext& ctx);

// logging.tensorboard on global rank 0: a new event file for this launch, starting at the
// first step it logs (`start` + 1), with the resolved spec as text and every metrics.jsonl
// line as scalars. Null elsewhere, or when it cannot be written (a warning, not a failure).
std::shared_ptr<observe::TensorBoardWriter> start_tensorboard(const ObservabilityOptions& options,
                                                              const comm::ProcessGroups& groups,
                                                              const TrainContext& ctx,
                                                              MetricsReporter& reporter,
                                                              int64_t start);

// logging.mlflow on global rank 0: params, every metrics.jsonl line and the run's status go
// to the tracking server from a thread of the tracker's own; null elsewhere or when off.
std::shared_ptr<observe::MlflowTracker> start_mlflow(const ObservabilityOptions& options,
                                                     const comm::ProcessGroups& groups,
                                                     const TrainContext& ctx,
                                                     MetricsReporter& reporter, int64_t start);

// The checkpointer's messages: on rank 0's console and in this rank's log.
std::function<void(const std::string&)> say_to(MetricsReporter& reporter);

// A resumed run whose checkpoint already has every step.
void announce_nothing_to_train(MetricsReporter& reporter, int64_t start, int64_t steps);

// metrics.jsonl as this run continues it (a torn last line cut off, the lines of steps
// after `start` dropped), with what was repaired in the log.
void report_metrics_repairs(MetricsReporter& reporter, int64_t start);

// metrics.jsonl, the console and this rank's log on logged steps (the throughput window
// then starts again); else only the live progress line.
void report_step(MetricsReporter& reporter, const StepMetrics& m, bool logged, StepTimer& timer);

// What this launch trained, for the closing line: steps `start`+1 .. `end` in `seconds`
// (`start`: 0, or the step of the checkpoint it resumed from).
struct AttemptSummary {
  int64_t start = 0, end = 0;
  double seconds = 0;
  bool stopped = false;

  // Tokens per second of this launch: only the steps it ran count (a resumed run's earlier
  // steps took an earlier launch's time); 0 when it ran none.
  double tokens_per_s(int64_t tokens_per_step) const;
  // "done: 40 steps in 12.3 s", resumed: "done: step 40 (20 steps from step 20) in 6.1 s";
  // "stopped" instead of "done" when should_stop() ended the run.
  std::string head() const;
};

}  // namespace trainctl::train
