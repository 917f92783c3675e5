#include "train/trainer.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "comm/progress.h"
#include "data/dataset.h"
#include "data/prefetcher.h"
#include "device/make_backend.h"
#include "model/gpt.h"
#include "ops/backend.h"
#include "optim/lr_schedule.h"
#include "parallel/data_parallel.h"
#include "train/checkpointing.h"
#include "train/engine.h"
#include "train/export_model.h"
#include "train/metrics.h"
#include "train/model_setup.h"

namespace trainctl::train {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Each pipeline stage's wait for its neighbours this step, gathered to every rank (a
// collective over the world: all ranks call it on the same steps).
std::vector<double> gather_pipeline_idle_ms(Engine& e, double idle_s) {
  comm::Communicator& world = *e.groups.world;
  const float mine = static_cast<float>(idle_s * 1e3);
  std::vector<float> all(static_cast<size_t>(world.size()));
  world.allgather(&mine, all.data(), 1);
  std::vector<double> per_stage;
  for (int stage = 0; stage < e.groups.layout.pp; ++stage) {
    per_stage.push_back(all[static_cast<size_t>(comm::rank_of(e.groups.layout, {0, 0, stage}))]);
  }
  return per_stage;
}

// This step's gradient communication over the DP group, seen from both ends: the rank
// whose backward pass finished last sets the step time and waits only for the part of
// the communication its backward could not hide; the others also wait for it (load
// imbalance, not communication). So exposed_comm_ms is the minimum over the DP ranks and
// dp_wait_max_ms the maximum (a collective over DP: all ranks call it on the same steps,
// when the gradient reduction has finished and the group is idle).
void add_dp_comm_stats(Engine& e, StepMetrics& m) {
  const parallel::StepCommStats mine = e.data_parallel.stats();
  // max of negated values gives the minima: one collective for both.
  float v[4] = {static_cast<float>(-mine.comm_s), static_cast<float>(-mine.exposed_s),
                static_cast<float>(mine.comm_s), static_cast<float>(mine.exposed_s)};
  e.groups.dp->allreduce(v, 4, comm::ReduceOp::max);
  m.comm_ms = -v[0] * 1e3;
  m.exposed_comm_ms = -v[1] * 1e3;
  m.dp_wait_max_ms = v[3] * 1e3;
}

void announce(const Engine& e, MetricsReporter& reporter) {
  const model::GptConfig& cfg = e.gpt.config();
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

}  // namespace

TrainResult run_training(const config::JobSpec& spec, comm::ProcessGroups& groups,
                         const TrainContext& ctx) {
  check_trainable(spec);
  const bool reporting = groups.rank == 0;
  const Device device = spec.device == config::Device::cuda ? Device::cuda : Device::cpu;
  Engine e(spec, groups, device::make_backend(device, backend_options(spec), ctx.local_rank));
  MetricsReporter reporter(reporting ? ctx.run_dir / "metrics.jsonl" : "",
                           reporting ? ctx.console_fd : -1);
  announce(e, reporter);

  const int64_t steps = spec.training.steps;
  const config::CheckpointSpec& policy = spec.checkpoint;
  Checkpointer ckpt(e, ctx.run_dir, [&](const std::string& line) {
    reporter.message(line);
    spdlog::info("{}", line);
  });
  const int64_t start = ckpt.restore(ctx.resume);
  if (start >= steps && reporting) {
    reporter.message("nothing to train: the checkpoint is at step " + std::to_string(start) +
                     " of " + std::to_string(steps) +
                     " (raise training.steps, or --resume none to start over)");
  }
  data::Prefetcher prefetch(*e.dataset, e.layout, std::min(start, steps), steps);
  TrainResult result;
  result.steps = start;
  int64_t saved_step = start > 0 ? start : -1;
  const auto t_start = Clock::now();
  auto t_window = t_start, t_saved = t_start;
  int64_t window_steps = 0;
  for (int64_t step = start; step < steps && !result.stopped; ++step) {
    const auto t_step = Clock::now();
    // The hang watchdog names the step a stuck collective belongs to (1-based, as logged).
    if (groups.progress) groups.progress->set_step(step + 1);
    StepRequests asked;
    asked.stop = ctx.should_stop && ctx.should_stop();
    // Rank 0's clock alone decides time-based checkpoints (the step's collective spreads
    // the request), so every rank saves after the same step.
    asked.checkpoint = reporting && policy.every_minutes > 0 &&
                       seconds_since(t_saved) >= policy.every_minutes * 60;
    asked.written = ckpt.written();
    const StepOutcome out = e.train_step(step, prefetch.next(), asked);
    ckpt.commit_if_written(out.all_written);
    ++window_steps;
    result.steps = step + 1;
    result.final_loss = out.loss;
    result.stopped = out.stop;

    StepMetrics m;
    m.step = step + 1;
    m.total_steps = steps;
    m.loss = out.loss;
    m.lr = out.lr;
    m.grad_norm = out.grad_norm;
    m.step_ms = seconds_since(t_step) * 1e3;
    m.elapsed_s = seconds_since(t_start);
    m.optimizer_state_mb = static_cast<double>(e.data_parallel.optimizer_state_bytes()) / (1 << 20);
    if (e.loss_scaler) m.loss_scale = out.loss_scale;
    m.skipped = out.skipped;
    if (e.backend->device() == Device::cuda) {
      m.device_mem_peak_mb = static_cast<double>(device::peak_device_bytes(*e.backend)) / (1 << 20);
    }
    const bool last = step + 1 == steps || out.stop;
    const bool log_step =
        (step + 1) % spec.logging.every_steps == 0 || step == 0 || last || out.skipped;
    if (e.groups.dp->size() > 1 && log_step) add_dp_comm_stats(e, m);
    if (e.pipeline && log_step) {
      m.pipeline_idle_ms = gather_pipeline_idle_ms(e, out.pipeline_idle_s);
      double idle = 0;
      for (double ms : m.pipeline_idle_ms) idle += ms;
      m.pipeline_bubble = idle / (static_cast<double>(m.pipeline_idle_ms.size()) * m.step_ms);
    }
    if (spec.training.eval_every > 0 && ((step + 1) % spec.training.eval_every == 0 || last)) {
      m.val_loss = e.evaluate();
      result.final_val_loss = *m.val_loss;
    }
    m.tokens_per_s =
        static_cast<double>(window_steps * e.tokens_per_step()) / seconds_since(t_window);
    if (log_step) {
      reporter.log(m);
      spdlog::info("step {}/{} loss {:.4f} lr {:.3e} grad_norm {:.3f} {:.0f} tok/s{}", m.step,
                   steps, m.loss, m.lr, m.grad_norm, m.tokens_per_s,
                   m.val_loss ? fmt::format(" val_loss {:.4f}", *m.val_loss) : "");
      t_window = Clock::now();
      window_steps = 0;
    } else {
      reporter.progress(m);
    }
    const bool periodic =
        (policy.every_steps > 0 && (step + 1) % policy.every_steps == 0) || out.checkpoint;
    if (periodic && !last) {
      ckpt.save(step + 1, policy.async);
      saved_step = step + 1;
      t_saved = Clock::now();
    }
  }
  // The end of training, or a stop signal (Slurm preemption): a complete checkpoint of
  // the last step, written before the run reports done.
  if (saved_step != result.steps) ckpt.save(result.steps, false);
  ckpt.finish_pending();
  const double total_s = seconds_since(t_start);
  result.tokens_per_s = static_cast<double>(result.steps * e.tokens_per_step()) / total_s;

  const auto model_path = ctx.run_dir / "model.safetensors";
  export_model(e.gpt, spec, groups, model_path);
  if (reporting) {
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
  }
  // Leave together: a rank that exits while a peer is still inside the last collective
  // closes the connection under it, and the peer fails (seen with halving-doubling).
  groups.world->barrier();
  return result;
}

}  // namespace trainctl::train
