#include "train/run_reporting.h"

#include <spdlog/spdlog.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "observe/metric_scalars.h"

namespace trainctl::train {

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
      e.layout.dp, e.options.backend.threads);
  std::string line = fmt::format(
      "training {}: {} steps, {} tokens/step, {:.2f} M parameters, unigram entropy {:.3f} nats",
      e.options.name, e.options.training.steps, e.tokens_per_step(), cfg.num_params() / 1e6,
      e.dataset->unigram_entropy());
  if (!std::isnan(e.dataset->best_loss())) {
    line += fmt::format(", best achievable loss {:.4f}", e.dataset->best_loss());
  }
  reporter.message(line);
}

// Only rank 0's reporter has a console.
MetricsReporter make_reporter(const ObservabilityOptions& options,
                              const comm::ProcessGroups& groups, const TrainContext& ctx) {
  const bool reporting = groups.rank == 0;
  return MetricsReporter(reporting ? ctx.run_dir / "metrics.jsonl" : "",
                         reporting ? ctx.console_fd : -1, options.log_every_steps);
}

// logging.tensorboard on global rank 0: a new event file for this launch, starting at the
// first step it logs (`start` + 1), with the resolved spec as text and every metrics.jsonl
// line as scalars. A TensorBoard file that cannot be written costs a warning, not the run.
std::shared_ptr<observe::TensorBoardWriter> start_tensorboard(const ObservabilityOptions& options,
                                                              const comm::ProcessGroups& groups,
                                                              const TrainContext& ctx,
                                                              MetricsReporter& reporter,
                                                              int64_t start) {
  if (groups.rank != 0 || !options.tensorboard) return nullptr;
  std::shared_ptr<observe::TensorBoardWriter> tb;
  try {
    tb = std::make_shared<observe::TensorBoardWriter>(ctx.run_dir / "tb", start + 1);
    // Indented four spaces: a code block in the text plugin's markdown.
    std::string yaml = "    " + options.resolved_yaml;
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

// logging.mlflow on global rank 0: a tracker that sends every metrics.jsonl line from a
// thread of its own (observe/mlflow_tracker.h). The reporter's sink holds it, so it outlives
// the last line and flushes at the end.
std::shared_ptr<observe::MlflowTracker> start_mlflow(const ObservabilityOptions& options,
                                                     const comm::ProcessGroups& groups,
                                                     const TrainContext& ctx,
                                                     MetricsReporter& reporter, int64_t start) {
  if (groups.rank != 0 || !options.mlflow) return nullptr;
  auto tracker = std::make_shared<observe::MlflowTracker>(*options.mlflow, ctx.run_dir,
                                                          options.resolved_yaml, start + 1);
  reporter.add_sink([tracker](const nlohmann::ordered_json& line) {
    tracker->log(line.at("step").get<int64_t>(), observe::metric_scalars(line));
  });
  return tracker;
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
                   " (raise training.steps, or --resume none --overwrite to start over)");
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

double AttemptSummary::tokens_per_s(int64_t tokens_per_step) const {
  const int64_t ran = end - start;
  if (ran <= 0 || !(seconds > 0)) return 0.0;
  return static_cast<double>(ran * tokens_per_step) / seconds;
}

std::string AttemptSummary::head() const {
  const char* what = stopped ? "stopped" : "done";
  if (start == 0) return fmt::format("{}: {} steps in {:.1f} s", what, end, seconds);
  return fmt::format("{}: step {} ({} steps from step {}) in {:.1f} s", what, end, end - start,
                     start, seconds);
}

}  // namespace trainctl::train
