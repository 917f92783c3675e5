#include "train/ps_training.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "data/prefetcher.h"
#include "device/make_backend.h"
#include "ps/ps_client.h"
#include "ps/shard_plan.h"
#include "train/cadence.h"
#include "train/checkpointing.h"
#include "train/engine.h"
#include "train/export_model.h"
#include "train/metrics.h"
#include "train/run_reporting.h"

namespace trainctl::train {

namespace {

using Clock = std::chrono::steady_clock;

// What worker 0 reports on its next metrics line, from server 0's replies since the last.
struct ReportWindow {
  double loss_sum = 0.0;
  int64_t loss_count = 0;
  int64_t gradients = 0;
  int64_t bytes_sent = 0;
  std::vector<int64_t> staleness;
  int64_t start_step = 0;
  Clock::time_point start = Clock::now();

  void add(const ps::PushReply& r) {
    loss_sum += r.loss_sum;
    loss_count += r.loss_count;
    gradients += r.gradients;
    bytes_sent += r.bytes_sent;
    if (staleness.size() < r.staleness.size()) staleness.resize(r.staleness.size(), 0);
    for (size_t i = 0; i < r.staleness.size(); ++i) staleness[i] += r.staleness[i];
  }
  int64_t max_staleness() const {
    for (size_t i = staleness.size(); i > 0; --i) {
      if (staleness[i - 1] > 0) return static_cast<int64_t>(i - 1);
    }
    return 0;
  }
  void restart(int64_t step) {
    *this = ReportWindow();
    start_step = step;
  }
};

// The largest of the workers' `mine` (collective over the world). Once every worker waits
// here no gradient is in flight, so the largest global step any of them was told is the
// servers' own. Exact for any int64 step: values travel as 16-bit pieces.
int64_t agreed_step(comm::Communicator& world, int64_t mine) {
  const auto n = static_cast<size_t>(world.size());
  float in[4];
  for (int i = 0; i < 4; ++i) in[i] = static_cast<float>((mine >> (16 * (3 - i))) & 0xffff);
  std::vector<float> all(4 * n);
  world.allgather(in, all.data(), 4);
  int64_t best = std::numeric_limits<int64_t>::min();
  for (size_t r = 0; r < n; ++r) {
    int64_t v = 0;
    for (int i = 0; i < 4; ++i) v = (v << 16) | static_cast<int64_t>(all[4 * r + i]);
    best = std::max(best, v);
  }
  return best;
}

// The fp32 weights the servers' values land in: the model's, or with mixed precision the
// master (whole on a worker: it runs no ZeRO); weights_changed() then rounds them into the
// model's 16-bit weights.
float* fp32_weights(Engine& e) {
  parallel::MixedParams* mixed = e.data_parallel.mixed();
  return mixed ? mixed->master() : e.gpt.params().data();
}
void weights_changed(Engine& e) {
  if (parallel::MixedParams* mixed = e.data_parallel.mixed()) mixed->publish();
}

// Worker 0's model and optimizer become the servers' (before it writes a checkpoint);
// what server 0 applied since worker 0's last reply joins its report window.
void take_server_state(Engine& e, ps::PsClient& client, ReportWindow& window) {
  model::ParameterSet& params = e.gpt.params();
  ps::PushReply applied;
  e.data_parallel.optimizer().load_state(
      client.fetch_state(fp32_weights(e), params.total(), &applied));
  weights_changed(e);
  window.add(applied);
}

ps::ClientOptions client_options(const RunOptions& options, const TrainContext& ctx) {
  ps::ClientOptions o;
  o.token = ctx.job_token;
  o.connect_timeout = options.comm_timeout;
  o.timeout = options.comm_timeout;
  return o;
}

void check_numerics(int64_t step, double loss, double norm) {
  if (std::isfinite(loss) && std::isfinite(norm)) return;
  throw std::runtime_error("bad numerics at this worker's step " + std::to_string(step + 1) +
                           ": loss " + std::to_string(loss) + ", gradient norm " +
                           std::to_string(norm) +
                           ". Lower optimizer.lr, raise optimizer.warmup_steps or set "
                           "training.grad_clip.");
}

// One crossing of a multiple of `every` between two global steps (a worker may see the
// global step jump by several at once).
bool crossed(int64_t before, int64_t now, int64_t every) {
  return every > 0 && now / every > before / every;
}

class PsWorker {
 public:
  PsWorker(const RunOptions& options, comm::ProcessGroups& groups, const TrainContext& ctx)
      : options_(options),
        groups_(groups),
        ctx_(ctx),
        e_(options, groups, device::make_backend(options.device, options.backend, ctx.local_rank)),
        reporter_(make_reporter(options.observability, groups, ctx)) {
    e_.slowdown = ctx.slowdown;
  }

  TrainResult run();

 private:
  void checkpoint_together(int64_t my_step);
  void log_line(int64_t step, double grad_norm, std::optional<double> val_loss);
  void finish(int64_t start, int64_t my_step, double grad_norm, TrainResult& result);

  const RunOptions& options_;
  comm::ProcessGroups& groups_;
  const TrainContext& ctx_;
  Engine e_;
  MetricsReporter reporter_;
  std::unique_ptr<ps::PsClient> client_;
  std::unique_ptr<Checkpointer> ckpt_;
  ReportWindow window_;
  StepTimer timer_;
};

TrainResult PsWorker::run() {
  announce(e_, reporter_);
  if (!ctx_.ps_server_addresses) {
    throw std::logic_error("parallel.mode: parameter_server needs the servers' addresses");
  }
  model::ParameterSet& params = e_.gpt.params();
  client_ = std::make_unique<ps::PsClient>(
      ctx_.ps_server_addresses(), groups_.rank,
      ps::plan_shards(params.list(), options_.parallel.ps_servers), client_options(options_, ctx_));
  ckpt_ = std::make_unique<Checkpointer>(e_, ctx_.run_dir, say_to(reporter_),
                                         ctx_.crash_in_checkpoint_step);
  const int64_t steps = options_.training.steps, start = ckpt_->restore(ctx_.resume);
  report_metrics_repairs(reporter_, start);
  // Worker 0 seeds the servers: the initial model, or the checkpoint it just loaded.
  if (groups_.rank == 0) {
    client_->seed(fp32_weights(e_), e_.data_parallel.optimizer().save_state(), start);
  }
  client_->pull(fp32_weights(e_));
  weights_changed(e_);
  if (start >= steps) {
    announce_nothing_to_train(reporter_, start, steps);
    client_->goodbye();
    groups_.world->barrier();
    return TrainResult{.steps = start};
  }
  const auto tensorboard =
      start_tensorboard(options_.observability, groups_, ctx_, reporter_, start);
  const auto mlflow = start_mlflow(options_.observability, groups_, ctx_, reporter_, start);
  // The budget is global: a fast worker may take more than its share of the steps left.
  const int64_t dp = options_.parallel.layout.dp;
  data::Prefetcher prefetch(*e_.dataset, e_.layout, start, start + (steps - start) * dp);
  // Each worker's pushed gradient is its own batch's mean: dp times its share of the
  // global step's sum (the servers average the gradients of an update).
  const float dloss = e_.grad_scale * static_cast<float>(dp);
  window_.restart(start);
  TrainResult result{.steps = start};
  int64_t local = start, global = start;
  double grad_norm = 0.0;
  for (;;) {
    timer_.begin_step();
    if (groups_.progress) groups_.progress->set_step(local + 1);
    const Engine::Gradients g = e_.compute_gradients(local, prefetch.next(), dloss);
    grad_norm = e_.data_parallel.grad_norm();
    check_numerics(local, g.loss_count > 0 ? g.loss_sum / g.loss_count : 0.0, grad_norm);
    e_.data_parallel.clip_grad_norm(grad_norm, options_.optimizer.grad_clip);
    ps::PushInfo info;
    info.local_step = local;
    info.loss_sum = g.loss_sum;
    info.loss_count = g.loss_count;
    info.stop_request = ctx_.should_stop && ctx_.should_stop();
    const ps::PushReply r = client_->push(params.grads(), info, fp32_weights(e_));
    weights_changed(e_);
    ++local;
    const int64_t before = global;
    global = std::max(global, r.global_step);
    window_.add(r);
    timer_.window().add(StepSample{.step_ms = timer_.step_ms()});
    result.final_loss = window_.loss_count > 0 ? window_.loss_sum / window_.loss_count : 0.0;
    if (r.done || r.stop) {
      result.stopped = r.stop && !r.done;
      break;
    }
    const bool logged =
        crossed(before, global, options_.observability.log_every_steps) || before == start;
    if (groups_.rank == 0) {
      std::optional<double> val;
      if (crossed(before, global, options_.training.eval_every)) {
        val = e_.evaluate(/*alone=*/true);
        result.final_val_loss = *val;
      }
      if (logged || val) {
        log_line(global, grad_norm, val);
      } else {
        StepMetrics m;
        m.step = global;
        m.total_steps = steps;
        m.loss = result.final_loss;
        reporter_.progress(m);
      }
    }
    if (r.checkpoint) checkpoint_together(global);
  }
  if (mlflow && !result.stopped) mlflow->finished();
  finish(start, global, grad_norm, result);
  return result;
}

// Every worker was told (once) by server 0: stop pushing, agree on the step, worker 0
// writes the servers' state, then all continue from the latest parameters.
void PsWorker::checkpoint_together(int64_t my_step) {
  client_->pause();
  const int64_t step = agreed_step(*groups_.world, my_step);
  if (groups_.rank == 0) take_server_state(e_, *client_, window_);
  // Synchronous: the workers share no per-step collective that could agree on committing
  // a background write later.
  ckpt_->save(step, /*async=*/false);
  // Every worker rejoins (its pull) before any pushes again: with max_staleness 0 a push
  // that found a worker still paused would be applied without it.
  client_->pull(fp32_weights(e_));
  weights_changed(e_);
  groups_.world->barrier();
}

// Per-step figures are means over the window: comm_bytes per global step (the line's
// step axis, as in synchronous training), step_ms over worker 0's own steps.
void PsWorker::log_line(int64_t step, double grad_norm, std::optional<double> val_loss) {
  const double seconds = std::chrono::duration<double>(Clock::now() - window_.start).count();
  StepMetrics m;
  m.step = step;
  m.total_steps = options_.training.steps;
  m.loss = window_.loss_count > 0 ? window_.loss_sum / window_.loss_count : 0.0;
  m.lr = e_.schedule.at(std::max<int64_t>(step - 1, 0));
  m.grad_norm = grad_norm;
  m.step_ms = timer_.window().mean().step_ms;
  m.tokens_per_s =
      seconds > 0
          ? static_cast<double>((step - window_.start_step) * e_.tokens_per_step()) / seconds
          : 0.0;
  m.val_loss = val_loss;
  m.comm_bytes = per_step_mean(window_.bytes_sent, step - window_.start_step);
  m.comm_bytes_window = window_.bytes_sent;
  m.elapsed_s = timer_.elapsed_s();
  m.ps_gradients = window_.gradients;
  m.ps_staleness = window_.staleness;
  m.ps_staleness_max = window_.max_staleness();
  m.ps_version = step;
  reporter_.log(m);
  spdlog::info(
      "step {}/{} loss {:.4f} lr {:.3e} grad_norm {:.3f} {:.0f} tok/s, {} gradients "
      "applied, staleness <= {}{}",
      m.step, m.total_steps, m.loss, m.lr, m.grad_norm, m.tokens_per_s, window_.gradients,
      *m.ps_staleness_max, val_loss ? fmt::format(" val_loss {:.4f}", *val_loss) : "");
  window_.restart(step);
  timer_.restart_window();
}

// The budget is spent (or a stop was relayed): no more pushes, then together: the final
// checkpoint of the servers' state, the last metrics line, the exported model.
void PsWorker::finish(int64_t start, int64_t my_step, double grad_norm, TrainResult& result) {
  client_->goodbye();
  const int64_t step = agreed_step(*groups_.world, my_step);
  result.steps = step;
  if (groups_.rank == 0) take_server_state(e_, *client_, window_);
  ckpt_->save_final(step);
  std::optional<double> val;
  if (groups_.rank == 0) {
    if (options_.training.eval_every > 0) {
      val = e_.evaluate(/*alone=*/true);
      result.final_val_loss = *val;
    }
    log_line(step, grad_norm, val);
  }
  const AttemptSummary attempt{start, step, timer_.elapsed_s(), result.stopped};
  result.tokens_per_s = attempt.tokens_per_s(e_.tokens_per_step());
  const auto model_path = ctx_.run_dir / "model.safetensors";
  export_model(e_.gpt, options_, groups_, model_path, fp32_weights(e_));
  if (groups_.rank == 0) {
    std::string line = attempt.head() + fmt::format(" | final loss {:.4f}", result.final_loss);
    if (result.final_val_loss >= 0) line += fmt::format(" | val {:.4f}", result.final_val_loss);
    line += fmt::format(" | {:.0f} tokens/s with {} parameter server(s) | model: {}",
                        result.tokens_per_s, options_.parallel.ps_servers, model_path.string());
    reporter_.message(line);
    spdlog::info("{}", line);
  }
  groups_.world->barrier();
}

}  // namespace

TrainResult run_ps_training(const RunOptions& options, comm::ProcessGroups& groups,
                            const TrainContext& ctx) {
  PsWorker worker(options, groups, ctx);
  return worker.run();
}

}  // namespace trainctl::train
