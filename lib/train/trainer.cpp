#include "train/trainer.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "data/dataset.h"
#include "data/prefetcher.h"
#include "model/gpt.h"
#include "ops/backend.h"
#include "optim/lr_schedule.h"
#include "parallel/data_parallel.h"
#include "train/export.h"
#include "train/metrics.h"
#include "train/model_setup.h"

namespace trainctl::train {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Everything one worker trains with, built from the spec once.
struct Engine {
  const config::JobSpec& spec;
  comm::Communicator& dp;
  std::unique_ptr<ops::Backend> backend;
  model::Gpt gpt;
  std::unique_ptr<data::Dataset> dataset;
  data::BatchLayout layout;
  // Gradient buckets reduced during the backward pass (or a reduce-scatter after it
  // under ZeRO-2) and a replicated or sharded optimizer.
  parallel::DataParallel data_parallel;
  optim::LrSchedule schedule;
  // Each token's loss enters the step's mean with this weight; DP ranks' gradients are
  // then summed, so the result equals one worker processing the whole global batch.
  float grad_scale;

  Engine(const config::JobSpec& s, comm::ProcessGroups& groups, std::unique_ptr<ops::Backend> be)
      : spec(s),
        dp(*groups.dp),
        backend(std::move(be)),
        gpt(gpt_config(s), *backend, s.training.micro_batch_size, s.model.seq_len),
        dataset(data::make_dataset(dataset_options(s))),
        layout{s.training.micro_batch_size, s.model.seq_len, s.grad_accum(), s.parallel.dp,
               groups.coord.dp},
        data_parallel(dp, gpt, *backend, optimizer_options(s), data_parallel_options(s, dp)),
        schedule{s.optimizer.lr, s.optimizer.min_lr, s.optimizer.warmup_steps, s.training.steps,
                 s.optimizer.decay},
        grad_scale(1.0f / static_cast<float>(tokens_per_step())) {
    gpt.init_weights(s.seed);
  }

  int64_t tokens_per_step() const { return layout.global_batch() * layout.seq_len; }

  static parallel::DataParallelOptions data_parallel_options(const config::JobSpec& s,
                                                             const comm::Communicator& dp) {
    parallel::DataParallelOptions o;
    o.zero_stage = dp.size() > 1 ? s.parallel.zero : 0;
    o.sync.buckets.bucket_bytes = static_cast<size_t>(s.parallel.bucket_mb * (1 << 20));
    o.sync.dtype = parallel::parse_grad_comm_dtype(s.parallel.grad_comm);
    return o;
  }
};

struct StepOutcome {
  double loss = 0.0;
  double grad_norm = 0.0;
  double lr = 0.0;
  bool stop = false;  // every DP rank agreed to stop after this step
};

// One optimizer step: micro-batches with gradient accumulation, gradient reduction over
// DP, clipping, update.
StepOutcome train_step(Engine& e, int64_t step, const data::StepBatch& batch, bool stop_asked) {
  e.gpt.params().zero_grads();
  double loss_sum = 0.0;
  int64_t loss_count = 0;
  for (int m = 0; m < e.layout.grad_accum; ++m) {
    // Gradient buckets travel only with the step's last micro-batch.
    e.data_parallel.begin_micro_batch(m + 1 == e.layout.grad_accum);
    int64_t n = 0;
    loss_sum += e.gpt.forward_backward(batch.micro_tokens(e.layout, m),
                                       batch.micro_targets(e.layout, m), e.grad_scale, &n);
    loss_count += n;
  }
  e.data_parallel.reduce_gradients();
  StepOutcome out;
  out.stop = stop_asked;
  if (e.dp.size() > 1) {
    // One small collective agrees on the step's loss and on stopping (a stop signal may
    // reach the ranks at different steps; all of them must leave at the same one).
    float totals[3] = {static_cast<float>(loss_sum), static_cast<float>(loss_count),
                       stop_asked ? 1.0f : 0.0f};
    e.dp.allreduce(totals, 3);
    loss_sum = totals[0];
    loss_count = static_cast<int64_t>(totals[1]);
    out.stop = totals[2] > 0;
  }
  out.loss = loss_sum / static_cast<double>(loss_count);
  out.grad_norm = e.data_parallel.grad_norm();
  if (!std::isfinite(out.loss) || !std::isfinite(out.grad_norm)) {
    throw std::runtime_error(
        "bad numerics at step " + std::to_string(step + 1) + ": loss " + std::to_string(out.loss) +
        ", gradient norm " + std::to_string(out.grad_norm) +
        ". Lower optimizer.lr, raise optimizer.warmup_steps or set training.grad_clip.");
  }
  e.data_parallel.clip_grad_norm(out.grad_norm, e.spec.training.grad_clip);
  out.lr = e.schedule.at(step);
  e.data_parallel.step(out.lr);
  return out;
}

// Mean validation loss over eval_batches batches, split round-robin over DP ranks.
double evaluate(Engine& e) {
  std::vector<int32_t> tokens, targets;
  double sum = 0.0;
  int64_t count = 0;
  for (int b = e.layout.dp_rank; b < e.spec.training.eval_batches; b += e.layout.dp) {
    data::fill_eval_batch(*e.dataset, e.layout, b, tokens, targets);
    int64_t n = 0;
    sum += e.gpt.forward_loss(tokens.data(), targets.data(), &n);
    count += n;
  }
  float totals[2] = {static_cast<float>(sum), static_cast<float>(count)};
  if (e.dp.size() > 1) e.dp.allreduce(totals, 2);
  return totals[1] > 0 ? totals[0] / totals[1] : 0.0;
}

void announce(const Engine& e, MetricsReporter& reporter) {
  const model::GptConfig& cfg = e.gpt.config();
  spdlog::info("model: GPT {} layers, {} heads, d_model {}, vocab {}, seq_len {}: {} parameters",
               cfg.n_layer, cfg.n_head, cfg.d_model, cfg.vocab_size, e.layout.seq_len,
               cfg.num_params());
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
  Engine e(spec, groups, ops::make_cpu_backend({.threads = spec.training.threads}));
  MetricsReporter reporter(reporting ? ctx.run_dir / "metrics.jsonl" : "",
                           reporting ? ctx.console_fd : -1);
  announce(e, reporter);

  const int64_t steps = spec.training.steps;
  data::Prefetcher prefetch(*e.dataset, e.layout, 0, steps);
  TrainResult result;
  const auto t_start = Clock::now();
  auto t_window = t_start;
  int64_t window_steps = 0;
  for (int64_t step = 0; step < steps && !result.stopped; ++step) {
    const auto t_step = Clock::now();
    const StepOutcome out =
        train_step(e, step, prefetch.next(), ctx.should_stop && ctx.should_stop());
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
    if (e.dp.size() > 1) {
      const parallel::StepCommStats comm = e.data_parallel.stats();
      m.comm_ms = comm.comm_s * 1e3;
      m.exposed_comm_ms = comm.exposed_s * 1e3;
    }
    m.optimizer_state_mb = static_cast<double>(e.data_parallel.optimizer_state_bytes()) / (1 << 20);
    const bool last = step + 1 == steps || out.stop;
    if (spec.training.eval_every > 0 && ((step + 1) % spec.training.eval_every == 0 || last)) {
      m.val_loss = evaluate(e);
      result.final_val_loss = *m.val_loss;
    }
    m.tokens_per_s =
        static_cast<double>(window_steps * e.tokens_per_step()) / seconds_since(t_window);
    if ((step + 1) % spec.logging.every_steps == 0 || step == 0 || last) {
      reporter.log(m);
      spdlog::info("step {}/{} loss {:.4f} lr {:.3e} grad_norm {:.3f} {:.0f} tok/s{}", m.step,
                   steps, m.loss, m.lr, m.grad_norm, m.tokens_per_s,
                   m.val_loss ? fmt::format(" val_loss {:.4f}", *m.val_loss) : "");
      t_window = Clock::now();
      window_steps = 0;
    } else {
      reporter.progress(m);
    }
  }
  const double total_s = seconds_since(t_start);
  result.tokens_per_s = static_cast<double>(result.steps * e.tokens_per_step()) / total_s;

  if (reporting) {
    const auto model_path = ctx.run_dir / "model.safetensors";
    export_model(e.gpt, spec, model_path);
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
