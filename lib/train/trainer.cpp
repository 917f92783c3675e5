#include "train/trainer.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>

#include "comm/progress.h"
#include "data/prefetcher.h"
#include "device/make_backend.h"
#include "observe/trace_recorder.h"
#include "train/batch_log.h"
#include "train/blend_progress.h"
#include "train/cadence.h"
#include "train/checkpointing.h"
#include "train/elastic_training.h"
#include "train/engine.h"
#include "train/export_model.h"
#include "train/metrics.h"
#include "train/ps_training.h"
#include "train/run_reporting.h"
#include "train/spec_options.h"
#include "train/step_stats.h"
#include "train/trace_output.h"

namespace trainctl::train {

namespace {

// What the run leaves to look at, for the summary (rank 0).
struct LookHere {
  bool tensorboard = false;
  std::string trace_note;  // non-empty: trace.json was written (the clock alignment)
};

// logging.profile_steps: the timeline recorder, handed to everything the engine runs.
std::unique_ptr<observe::TraceRecorder> start_profiling(const ObservabilityOptions& options,
                                                        Engine& e) {
  if (!options.profiling()) return nullptr;
  auto recorder =
      std::make_unique<observe::TraceRecorder>(options.profile_first, options.profile_last);
  e.set_trace(recorder.get());
  return recorder;
}

// A step's batch from the prefetcher: the wait is on the timeline when profiling.
data::StepBatch next_batch(data::Prefetcher& prefetch, observe::TraceRecorder* trace) {
  observe::TraceScope scope(trace, "data.wait", "data");
  return prefetch.next();
}

// After the last step (and its checkpoint): the model exported, the summary line, and all
// ranks leaving together.
void finish_run(const Engine& e, MetricsReporter& reporter, const TrainContext& ctx,
                const AttemptSummary& attempt, const LookHere& look, TrainResult& result) {
  result.tokens_per_s = attempt.tokens_per_s(e.tokens_per_step());
  const auto model_path = ctx.run_dir / "model.safetensors";
  // ZeRO-3 holds shards: gather the whole parameters (collective over DP) to export them.
  std::vector<float> gathered;
  if (parallel::Zero3Params* zero3 = e.data_parallel.zero3()) gathered = zero3->gather_flat();
  // Mixed precision: the fp32 master weights, the model's full-precision values.
  if (parallel::MixedParams* mixed = e.data_parallel.mixed()) gathered = mixed->gather_master();
  export_model(e.gpt, e.options, e.groups, model_path,
               gathered.empty() ? nullptr : gathered.data());
  if (e.groups.rank == 0) {
    std::string line = attempt.head() + fmt::format(" | final loss {:.4f}", result.final_loss);
    if (result.final_val_loss >= 0) line += fmt::format(" | val {:.4f}", result.final_val_loss);
    line +=
        fmt::format(" | {:.0f} tokens/s ({:.1f} GFLOP/s model) | model: {}", result.tokens_per_s,
                    result.tokens_per_s * e.gpt.config().flops_per_token(e.layout.seq_len) / 1e9,
                    model_path.string());
    reporter.message(line);
    spdlog::info("{}", line);
    // Where to look next (docs/commands.md).
    const std::string run = ctx.run_dir.string();
    if (look.tensorboard) reporter.message("  tensorboard --logdir " + run + "/tb");
    reporter.message("  trainctl report " + run + " --out " + run + "/report.html");
    if (!look.trace_note.empty()) {
      reporter.message("  trace: " + run + "/trace.json (open in https://ui.perfetto.dev or " +
                       "chrome://tracing; clocks " + look.trace_note + ")");
    }
  }
  // Leave together: a rank that exits while a peer is still inside the last collective
  // closes the connection under it, and the peer fails (seen with halving-doubling).
  e.groups.world->barrier();
}

}  // namespace

TrainResult run_training(const config::JobSpec& spec, comm::ProcessGroups& groups,
                         const TrainContext& ctx) {
  check_trainable(spec);
  // Options, once: below this line nothing reads the spec.
  const RunOptions options = run_options(spec);
  if (options.parallel.parameter_server) return run_ps_training(options, groups, ctx);
  if (options.fault_tolerance.enabled) return run_elastic_training(options, groups, ctx);
  // The backend, then the engine: this rank's model shard on it, the data, DP, the pipeline.
  std::unique_ptr<ops::Backend> backend =
      device::make_backend(options.device, options.backend, ctx.local_rank);
  Engine e(options, groups, std::move(backend));
  e.slowdown = ctx.slowdown;
  // What watches and saves the run. The profiler comes before the checkpointer: its
  // background writer records into it, so it must outlive it.
  const auto recorder = start_profiling(options.observability, e);
  MetricsReporter reporter = make_reporter(options.observability, groups, ctx);
  announce(e, reporter);
  Checkpointer ckpt(e, ctx.run_dir, say_to(reporter), ctx.crash_in_checkpoint_step);
  const int64_t steps = options.training.steps, start = ckpt.restore(ctx.resume);
  report_metrics_repairs(reporter, start);
  if (start >= steps) {
    // No step, so no summary either (its time and throughput would be of nothing); the
    // model the finished run exported stays as it was.
    announce_nothing_to_train(reporter, start, steps);
    groups.world->barrier();
    return TrainResult{.steps = start};
  }
  const auto tensorboard = start_tensorboard(options.observability, groups, ctx, reporter, start);
  const auto mlflow = start_mlflow(options.observability, groups, ctx, reporter, start);
  // The loop: batch, step, metrics, evaluation and checkpoint when due.
  data::Prefetcher prefetch(*e.dataset, e.layout, std::min(start, steps), steps);
  BatchLog batch_log(ctx.batch_log, groups.coord.tp == 0 && groups.coord.pp == 0, ctx.run_dir,
                     groups.rank);
  TrainResult result{.steps = start};
  StepTimer timer;
  for (int64_t step = start; step < steps && !result.stopped; ++step) {
    timer.begin_step();
    // The hang watchdog names the step a stuck collective belongs to (1-based, as logged).
    if (groups.progress) groups.progress->set_step(step + 1);
    if (recorder) recorder->set_step(step + 1);
    const StepRequests asked{ctx.should_stop && ctx.should_stop(), ckpt.time_due(), ckpt.written()};
    const data::StepBatch batch = next_batch(prefetch, recorder.get());
    batch_log.log(e.layout, batch);
    const StepOutcome out = e.train_step(step, batch, asked);
    ckpt.commit_if_written(out.all_written);
    result.steps = step + 1;
    result.final_loss = out.loss;
    result.stopped = out.stop;
    const bool last = step + 1 == steps || out.stop;
    const bool logged = reporter.should_log(step + 1, last, out.skipped);
    StepMetrics m = measure_step(e, out, step + 1, timer, logged);
    if (eval_due(options.training, step + 1, last)) {
      m.val_loss = e.evaluate();
      m.source_val_losses = evaluate_sources(e);
      result.final_val_loss = *m.val_loss;
    }
    m.tokens_per_s = timer.tokens_per_s(e.tokens_per_step());
    report_step(reporter, m, logged, timer);
    observe::TraceScope save(recorder.get(), "checkpoint", "checkpoint");
    ckpt.maybe_save(step + 1, last, out.checkpoint);
  }
  ckpt.save_final(result.steps);
  if (mlflow && !result.stopped) mlflow->finished();
  if (groups.rank == 0) write_data_sources(e, ctx.run_dir, result.steps);
  LookHere look;
  look.tensorboard = tensorboard != nullptr;
  if (recorder) {
    look.trace_note = write_merged_trace(*recorder, groups, ctx.run_dir / "trace.json");
  }
  finish_run(e, reporter, ctx, {start, result.steps, timer.elapsed_s(), result.stopped}, look,
             result);
  return result;
}

}  // namespace trainctl::train
