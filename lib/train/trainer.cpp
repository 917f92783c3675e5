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

// Mean validation loss over eval_batches batches, split round-robin over DP ranks.
double evaluate(model::Gpt& gpt, const data::Dataset& data, const data::BatchLayout& layout,
                int eval_batches, comm::Communicator& dp) {
  std::vector<int32_t> tokens, targets;
  double sum = 0.0;
  int64_t count = 0;
  for (int e = layout.dp_rank; e < eval_batches; e += layout.dp) {
    data::fill_eval_batch(data, layout, e, tokens, targets);
    int64_t n = 0;
    sum += gpt.forward_loss(tokens.data(), targets.data(), &n);
    count += n;
  }
  float totals[2] = {static_cast<float>(sum), static_cast<float>(count)};
  if (dp.size() > 1) dp.allreduce(totals, 2);
  return totals[1] > 0 ? totals[0] / totals[1] : 0.0;
}

}  // namespace

TrainResult run_training(const config::JobSpec& spec, comm::ProcessGroups& groups,
                         const TrainContext& ctx) {
  check_trainable(spec);
  const bool reporter_rank = groups.rank == 0;
  const int T = spec.model.seq_len, mb = spec.training.micro_batch_size;
  const int accum = spec.grad_accum();
  const int64_t steps = spec.training.steps;

  auto backend = ops::make_cpu_backend({.threads = spec.training.threads});
  const model::GptConfig cfg = gpt_config(spec);
  model::Gpt gpt(cfg, *backend, mb, T);
  gpt.init_weights(spec.seed);
  auto dataset = data::make_dataset(dataset_options(spec));
  comm::Communicator& dp = *groups.dp;
  // Data parallelism: gradient buckets reduced during the backward pass (or a
  // reduce-scatter after it under ZeRO-2) and a replicated or sharded optimizer.
  parallel::DataParallelOptions dp_options;
  dp_options.zero_stage = dp.size() > 1 ? spec.parallel.zero : 0;
  dp_options.sync.buckets.bucket_bytes = static_cast<size_t>(spec.parallel.bucket_mb * (1 << 20));
  dp_options.sync.dtype = parallel::parse_grad_comm_dtype(spec.parallel.grad_comm);
  parallel::DataParallel data_parallel(dp, gpt, *backend, optimizer_options(spec), dp_options);
  const optim::LrSchedule schedule{spec.optimizer.lr, spec.optimizer.min_lr,
                                   spec.optimizer.warmup_steps, steps, spec.optimizer.decay};
  const data::BatchLayout layout{mb, T, accum, spec.parallel.dp, groups.coord.dp};
  const int64_t tokens_per_step = layout.global_batch() * T;
  // Each token's loss enters the step's mean with this weight; DP ranks' gradients are
  // then summed, so the result equals one worker processing the whole global batch.
  const float grad_scale = 1.0f / static_cast<float>(tokens_per_step);

  MetricsReporter reporter(reporter_rank ? ctx.run_dir / "metrics.jsonl" : "",
                           reporter_rank ? ctx.console_fd : -1);
  spdlog::info("model: GPT {} layers, {} heads, d_model {}, vocab {}, seq_len {}: {} parameters",
               cfg.n_layer, cfg.n_head, cfg.d_model, cfg.vocab_size, T, cfg.num_params());
  spdlog::info("data: {}", dataset->describe());
  spdlog::info(
      "batch: {} sequences x {} tokens per step (micro-batch {}, accumulation {}, dp {}); "
      "{} compute thread(s)",
      layout.global_batch(), T, mb, accum, layout.dp, spec.training.threads);
  if (reporter_rank) {
    char line[256];
    std::snprintf(line, sizeof line,
                  "training %s: %lld steps, %lld tokens/step, %.2f M parameters, unigram "
                  "entropy %.3f nats%s",
                  spec.name.c_str(), static_cast<long long>(steps),
                  static_cast<long long>(tokens_per_step), cfg.num_params() / 1e6,
                  dataset->unigram_entropy(),
                  std::isnan(dataset->best_loss())
                      ? ""
                      : (", best achievable loss " + std::to_string(dataset->best_loss())).c_str());
    reporter.message(line);
  }

  data::Prefetcher prefetch(*dataset, layout, 0, steps);
  TrainResult result;
  const auto t_start = Clock::now();
  auto t_window = t_start;
  int64_t window_steps = 0;
  for (int64_t step = 0; step < steps; ++step) {
    const auto t_step = Clock::now();
    const data::StepBatch batch = prefetch.next();
    gpt.params().zero_grads();
    double loss_sum = 0.0;
    int64_t loss_count = 0;
    for (int m = 0; m < accum; ++m) {
      // Gradient buckets travel only with the step's last micro-batch.
      data_parallel.begin_micro_batch(m + 1 == accum);
      int64_t n = 0;
      loss_sum += gpt.forward_backward(batch.micro_tokens(layout, m),
                                       batch.micro_targets(layout, m), grad_scale, &n);
      loss_count += n;
    }
    data_parallel.reduce_gradients();
    bool stop = ctx.should_stop && ctx.should_stop();
    if (dp.size() > 1) {
      // One small collective agrees on the step's loss and on stopping (a stop signal may
      // reach the ranks at different steps; all of them must leave at the same one).
      float totals[3] = {static_cast<float>(loss_sum), static_cast<float>(loss_count),
                         stop ? 1.0f : 0.0f};
      dp.allreduce(totals, 3);
      loss_sum = totals[0];
      loss_count = static_cast<int64_t>(totals[1]);
      stop = totals[2] > 0;
    }
    const double loss = loss_sum / static_cast<double>(loss_count);
    const double norm = data_parallel.grad_norm();
    if (!std::isfinite(loss) || !std::isfinite(norm)) {
      throw std::runtime_error(
          "bad numerics at step " + std::to_string(step + 1) + ": loss " + std::to_string(loss) +
          ", gradient norm " + std::to_string(norm) +
          ". Lower optimizer.lr, raise optimizer.warmup_steps or set training.grad_clip.");
    }
    data_parallel.clip_grad_norm(norm, spec.training.grad_clip);
    const double lr = schedule.at(step);
    data_parallel.step(lr);
    ++window_steps;

    StepMetrics m;
    m.step = step + 1;
    m.total_steps = steps;
    m.loss = loss;
    m.lr = lr;
    m.grad_norm = norm;
    m.step_ms = seconds_since(t_step) * 1e3;
    m.elapsed_s = seconds_since(t_start);
    if (dp.size() > 1) {
      const parallel::StepCommStats comm_stats = data_parallel.stats();
      m.comm_ms = comm_stats.comm_s * 1e3;
      m.exposed_comm_ms = comm_stats.exposed_s * 1e3;
    }
    m.optimizer_state_mb = static_cast<double>(data_parallel.optimizer_state_bytes()) / (1 << 20);
    const bool last = step + 1 == steps || stop;
    if (spec.training.eval_every > 0 && ((step + 1) % spec.training.eval_every == 0 || last)) {
      m.val_loss = evaluate(gpt, *dataset, layout, spec.training.eval_batches, dp);
      result.final_val_loss = *m.val_loss;
    }
    const bool log_now = (step + 1) % spec.logging.every_steps == 0 || step == 0 || last;
    const double window_s = seconds_since(t_window);
    m.tokens_per_s = static_cast<double>(window_steps * tokens_per_step) / window_s;
    if (log_now) {
      reporter.log(m);
      spdlog::info("step {}/{} loss {:.4f} lr {:.3e} grad_norm {:.3f} {:.0f} tok/s{}", m.step,
                   steps, loss, lr, norm, m.tokens_per_s,
                   m.val_loss ? fmt::format(" val_loss {:.4f}", *m.val_loss) : "");
      t_window = Clock::now();
      window_steps = 0;
    } else {
      reporter.progress(m);
    }
    result.steps = step + 1;
    result.final_loss = loss;
    if (stop) {
      result.stopped = true;
      break;
    }
  }
  const double total_s = seconds_since(t_start);
  result.tokens_per_s = static_cast<double>(result.steps * tokens_per_step) / total_s;

  if (reporter_rank) {
    const auto model_path = ctx.run_dir / "model.safetensors";
    export_model(gpt, spec, model_path);
    char line[512];
    std::snprintf(line, sizeof line,
                  "%s: %lld steps in %.1f s | final loss %.4f%s | %.0f tokens/s (%.1f "
                  "GFLOP/s model) | model: %s",
                  result.stopped ? "stopped" : "done", static_cast<long long>(result.steps),
                  total_s, result.final_loss,
                  result.final_val_loss >= 0
                      ? (" | val " + std::to_string(result.final_val_loss).substr(0, 6)).c_str()
                      : "",
                  result.tokens_per_s, result.tokens_per_s * cfg.flops_per_token(T) / 1e9,
                  model_path.string().c_str());
    reporter.message(line);
    spdlog::info("{}", line);
  }
  return result;
}

}  // namespace trainctl::train
