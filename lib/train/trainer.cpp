#include "train/trainer.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>

#include "comm/progress.h"
#include "config/load.h"
#include "data/prefetcher.h"
#include "device/make_backend.h"
#include "observe/metric_scalars.h"
#include "observe/tensorboard_writer.h"
#include "observe/trace_recorder.h"
#include "train/cadence.h"
#include "train/checkpointing.h"
#include "train/engine.h"
#include "train/export_model.h"
#include "train/metrics.h"
#include "train/spec_options.h"
#include "train/step_stats.h"
#include "train/trace_output.h"

namespace trainctl::train {

namespace {

std::unique_ptr<ops::Backend> make_engine_backend(const config::JobSpec& spec, int local_rank) {
  return device::make_backend(spec.device, backend_options(spec), local_rank);
}

void announce(const Engine& e, MetricsReporter& reporter) {
  const model::ModelConfig& cfg = e.gpt.config();
  spdlog::info("model: GPT {} layers, {} heads, d_model {}, vocab {}, seq_len {}: {} parameters",
               cfg.n_layer, cfg.n_head, cfg.d_model, cfg.vocab_size, e.layout.seq_len,
               cfg.num_params());
  const model::GptShardSpec& shard = e.gpt.shard();
  std::string chunks;
  for (const model::LayerRange& c : shard.chunks) {
    chunks += fmt::format("{}blocks {}-{}", chunks.empty() ? "" : ", ", c.begin, c.end - 1);
  }
  spdlog::info("shard: {}{}{}, tp rank {}/{}: {} parameters here", chunks,
               shard.embedding ? ", embedding" : "", shard.head ? ", LM head" : "", shard.tp_rank,
               shard.tp_size, e.gpt.params().total());
  spdlog::info("data: {}", e.dataset->describe());
  spdlog::info(
      "batch: {} sequences x {} tokens per step (micro-batch {}, accumulation {}, dp {}); "
      "{} compute thread(s)",
      e.layout.global_batch(), e.layout.seq_len, e.layout.micro_batch, e.layout.grad_accum,
      e.layout.dp, e.spec.training.threads);
  std::string line = fmt::format(
      "training {}: {} steps, {} tokens/step, {:.2f} M parameters, unigram entropy {:.3f} nats",
      e.spec.name, e.spec.training.steps, e.tokens_per_step(), cfg.num_params() / 1e6,
      e.dataset->unigram_entropy());
  if (!std::isnan(e.dataset->best_loss())) {
    line += fmt::format(", best achievable loss {:.4f}", e.dataset->best_loss());
  }
  reporter.message(line);
}

// Only rank 0's reporter has a console.
MetricsReporter make_reporter(const config::JobSpec& spec, const comm::ProcessGroups& groups,
                              const TrainContext& ctx) {
  const bool reporting = groups.rank == 0;
  return MetricsReporter(reporting ? ctx.run_dir / "metrics.jsonl" : "",
                         reporting ? ctx.console_fd : -1, spec.logging.every_steps);
}

// logging.tensorboard on global rank 0: a new event file for this launch, starting at the
// first step it logs (`start` + 1), with the resolved spec as text and every metrics.jsonl
// line as scalars. A TensorBoard file that cannot be written costs a warning, not the run.
std::shared_ptr<observe::TensorBoardWriter> start_tensorboard(const config::JobSpec& spec,
                                                              const comm::ProcessGroups& groups,
                                                              const TrainContext& ctx,
                                                              MetricsReporter& reporter,
                                                              int64_t start) {
  if (groups.rank != 0 || !spec.logging.tensorboard) return nullptr;
  std::shared_ptr<observe::TensorBoardWriter> tb;
  try {
    tb = std::make_shared<observe::TensorBoardWriter>(ctx.run_dir / "tb", start + 1);
    // Indented four spaces: a code block in the text plugin's markdown.
    std::string yaml = "    " + config::to_yaml(spec);
    for (size_t i = yaml.find('\n'); i != std::string::npos && i + 1 < yaml.size();
         i = yaml.find('\n', i + 1)) {
      yaml.insert(i + 1, "    ");
    }
    tb->add_text(start, "config", yaml);
  } catch (const std::exception& ex) {
    spdlog::warn("TensorBoard disabled: {}", ex.what());
    return nullptr;
  }
  reporter.add_sink([tb](const nlohmann::ordered_json& line) {
    try {
      tb->add_scalars(line.at("step").get<int64_t>(), observe::metric_scalars(line));
    } catch (const std::exception& ex) {
      spdlog::warn("TensorBoard: {}", ex.what());
    }
  });
  return tb;
}

// The checkpointer's messages: on rank 0's console and in this rank's log.
std::function<void(const std::string&)> say_to(MetricsReporter& reporter) {
  return [&reporter](const std::string& line) {
    reporter.message(line);
    spdlog::info("{}", line);
  };
}

// On rank 0's console (the others' reporters have none).
void announce_nothing_to_train(MetricsReporter& reporter, int64_t start, int64_t steps) {
  reporter.message("nothing to train: the checkpoint is at step " + std::to_string(start) + " of " +
                   std::to_string(steps) +
                   " (raise training.steps, or --resume none to start over)");
}

// metrics.jsonl as this run continues it: a torn last line (a crash mid-write) was cut off
// when it was opened, and the steps after `start` that an earlier run logged go (they are
// trained again), so each step appears once.
void report_metrics_repairs(MetricsReporter& reporter, int64_t start) {
  if (const size_t torn = reporter.repaired_bytes()) {
    spdlog::warn("metrics.jsonl ended in a torn line ({} bytes, an interrupted write): cut off",
                 torn);
  }
  if (const size_t dropped = reporter.continue_after(start)) {
    spdlog::info("metrics.jsonl: dropped {} line(s) of steps after {}, which are trained again",
                 dropped, start);
  }
}

// metrics.jsonl, the console and this rank's log on logged steps (the throughput window
// then starts again); else only the live progress line.
void report_step(MetricsReporter& reporter, const StepMetrics& m, bool logged, StepTimer& timer) {
  if (!logged) {
    reporter.progress(m);
    return;
  }
  reporter.log(m);
  spdlog::info("step {}/{} loss {:.4f} lr {:.3e} grad_norm {:.3f} {:.0f} tok/s{}", m.step,
               m.total_steps, m.loss, m.lr, m.grad_norm, m.tokens_per_s,
               m.val_loss ? fmt::format(" val_loss {:.4f}", *m.val_loss) : "");
  timer.restart_window();
}

// After the last step (and its checkpoint): the model exported, the summary line, and all
// ranks leaving together.
// What the run leaves to look at, for the summary (rank 0).
struct LookHere {
  bool tensorboard = false;
  std::string trace_note;  // non-empty: trace.json was written (the clock alignment)
};

// logging.profile_steps: the timeline recorder, handed to everything the engine runs.
std::unique_ptr<observe::TraceRecorder> start_profiling(const config::JobSpec& spec, Engine& e) {
  if (!spec.logging.profiling()) return nullptr;
  auto recorder = std::make_unique<observe::TraceRecorder>(spec.logging.profile_first,
                                                           spec.logging.profile_last);
  e.set_trace(recorder.get());
  return recorder;
}

// A step's batch from the prefetcher: the wait is on the timeline when profiling.
data::StepBatch next_batch(data::Prefetcher& prefetch, observe::TraceRecorder* trace) {
  observe::TraceScope scope(trace, "data.wait", "data");
  return prefetch.next();
}

void finish_run(const Engine& e, MetricsReporter& reporter, const TrainContext& ctx, double total_s,
                const LookHere& look, TrainResult& result) {
  result.tokens_per_s = static_cast<double>(result.steps * e.tokens_per_step()) / total_s;
  const auto model_path = ctx.run_dir / "model.safetensors";
  // ZeRO-3 holds shards: gather the whole parameters (collective over DP) to export them.
  std::vector<float> gathered;
  if (parallel::Zero3Params* zero3 = e.data_parallel.zero3()) gathered = zero3->gather_flat();
  export_model(e.gpt, e.spec, e.groups, model_path, gathered.empty() ? nullptr : gathered.data());
  if (e.groups.rank == 0) {
    std::string line =
        fmt::format("{}: {} steps in {:.1f} s | final loss {:.4f}",
                    result.stopped ? "stopped" : "done", result.steps, total_s, result.final_loss);
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
  Engine e(spec, groups, make_engine_backend(spec, ctx.local_rank));
  // Before the checkpointer: its background writer records into it, so it must outlive it.
  const auto recorder = start_profiling(spec, e);
  MetricsReporter reporter = make_reporter(spec, groups, ctx);
  announce(e, reporter);
  Checkpointer ckpt(e, ctx.run_dir, say_to(reporter), ctx.crash_in_checkpoint_step);
  const int64_t steps = spec.training.steps, start = ckpt.restore(ctx.resume);
  report_metrics_repairs(reporter, start);
  if (start >= steps) {
    // No step, so no summary either (its time and throughput would be of nothing); the
    // model the finished run exported stays as it was.
    announce_nothing_to_train(reporter, start, steps);
    groups.world->barrier();
    return TrainResult{.steps = start};
  }
  const auto tensorboard = start_tensorboard(spec, groups, ctx, reporter, start);
  data::Prefetcher prefetch(*e.dataset, e.layout, std::min(start, steps), steps);
  TrainResult result{.steps = start};
  StepTimer timer;
  for (int64_t step = start; step < steps && !result.stopped; ++step) {
    timer.begin_step();
    // The hang watchdog names the step a stuck collective belongs to (1-based, as logged).
    if (groups.progress) groups.progress->set_step(step + 1);
    if (recorder) recorder->set_step(step + 1);
    const StepRequests asked{ctx.should_stop && ctx.should_stop(), ckpt.time_due(), ckpt.written()};
    const StepOutcome out = e.train_step(step, next_batch(prefetch, recorder.get()), asked);
    ckpt.commit_if_written(out.all_written);
    result.steps = step + 1;
    result.final_loss = out.loss;
    result.stopped = out.stop;
    const bool last = step + 1 == steps || out.stop;
    const bool logged = reporter.should_log(step + 1, last, out.skipped);
    StepMetrics m = measure_step(e, out, step + 1, timer, logged);
    if (eval_due(spec.training, step + 1, last)) {
      m.val_loss = e.evaluate();
      result.final_val_loss = *m.val_loss;
    }
    m.tokens_per_s = timer.tokens_per_s(e.tokens_per_step());
    report_step(reporter, m, logged, timer);
    observe::TraceScope save(recorder.get(), "checkpoint", "checkpoint");
    ckpt.maybe_save(step + 1, last, out.checkpoint);
  }
  ckpt.save_final(result.steps);
  LookHere look;
  look.tensorboard = tensorboard != nullptr;
  if (recorder) {
    look.trace_note = write_merged_trace(*recorder, groups, ctx.run_dir / "trace.json");
  }
  finish_run(e, reporter, ctx, timer.elapsed_s(), look, result);
  return result;
}

}  // namespace trainctl::train
