#include "train/engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>
#include <string>
#include <thread>

#include "comm/solo_communicator.h"
#include "comm/watched_communicator.h"
#include "parallel/tied_embedding.h"
#include "train/rank_options.h"

namespace trainctl::train {

Engine::Engine(const RunOptions& o, comm::ProcessGroups& g, std::unique_ptr<ops::Backend> be)
    : options(o),
      groups(g),
      backend(std::move(be)),
      program(stage_program(o.parallel, g)),
      gpt(o.model.config, *backend, o.model.micro_batch_size, local_seq_len(o),
          model_options(o, g, program)),
      dataset(data::make_dataset(o.data)),
      layout(batch_layout(o, g)),
      solo_dp(o.parallel.parameter_server
                  ? std::make_unique<comm::SoloCommunicator>("dp(parameter servers)")
                  : nullptr),
      data_parallel(solo_dp ? *solo_dp : *g.dp, gpt, *backend, o.optimizer.update,
                    data_parallel_options(o.parallel, g, gpt, o.backend.matmul)),
      moe(gpt, solo_dp ? *solo_dp : *g.dp, layout.global_batch()),
      schedule(o.optimizer.lr),
      grad_scale(1.0f / static_cast<float>(tokens_per_step())),
      cp_chunks(context_chunks(o, g)) {
  if (parallel::Zero3Params* zero3 = data_parallel.zero3()) {
    zero3->init_weights(o.seed);  // unit by unit: never the whole model on one rank
    zero3->refresh();
  } else if (parallel::MixedParams* mixed = data_parallel.mixed()) {
    mixed->init_weights(o.seed);  // fp32 master, 16-bit weights, unit by unit
  } else {
    gpt.init_weights(o.seed);
  }
  // DiLoCo's outer parameters start from the initialised weights: the sync object was
  // made (with the data-parallel machinery) before they were drawn.
  if (parallel::PeriodicSync* periodic = data_parallel.periodic()) periodic->reset_outer();
  if (o.optimizer.loss_scaling) loss_scaler.emplace(*o.optimizer.loss_scaling);
  if (!program.empty())
    pipeline.emplace(gpt, *g.pp, program, layout.grad_accum,
                     parallel::chunk_order(o.parallel.schedule),
                     parallel::boundary_staging_pool(o.parallel.schedule, o.parallel.layout.pp,
                                                     layout.grad_accum, o.parallel.virtual_stages));
}

const int32_t* Engine::local_rows(const int32_t* full, std::vector<int32_t>& buffer, int m) {
  if (!cp_chunks.active()) return full;
  const size_t rows = static_cast<size_t>(layout.micro_batch) * cp_chunks.local_len();
  // Sized once for the step's micro-batches: pointers handed out stay valid all step.
  if (buffer.empty()) buffer.resize(rows * static_cast<size_t>(std::max(1, layout.grad_accum)));
  int32_t* local = buffer.data() + rows * static_cast<size_t>(m);
  cp_chunks.take_local(full, layout.micro_batch, layout.seq_len, local);
  return local;
}

void Engine::set_trace(observe::TraceRecorder* recorder) {
  trace = recorder;
  gpt.set_trace(recorder);
  if (pipeline) pipeline->set_trace(recorder);
  comm::trace_process_groups(groups, recorder);
}

Engine::Gradients Engine::compute_gradients(int64_t step, const data::StepBatch& batch,
                                            float dloss) {
  const auto compute_start = std::chrono::steady_clock::now();
  gpt.params().zero_grads();
  moe.begin_step();
  data_parallel.begin_step(step);
  Gradients g;
  if (!pipeline) {
    for (int m = 0; m < layout.grad_accum; ++m) {
      // Gradient buckets travel only with the step's last micro-batch.
      data_parallel.begin_micro_batch(m + 1 == layout.grad_accum);
      observe::TraceFields mb;
      mb.micro_batch = m;
      observe::TraceScope scope(trace, "micro_batch", "compute", mb);
      int64_t n = 0;
      g.loss_sum +=
          gpt.forward_backward(local_rows(batch.micro_tokens(layout, m), cp_tokens),
                               local_rows(batch.micro_targets(layout, m), cp_targets), dloss, &n);
      g.loss_count += n;
    }
  } else {
    const parallel::PipelineStepResult r = pipeline->run_step(
        [&](int m) {
          return parallel::MicroBatchData{
              local_rows(batch.micro_tokens(layout, m), cp_tokens, m),
              local_rows(batch.micro_targets(layout, m), cp_targets, m)};
        },
        dloss, [&] { data_parallel.begin_micro_batch(true); });
    parallel::exchange_tied_embedding_grad(gpt, *groups.pp, true, data_parallel.zero3());
    g.loss_sum = r.loss_sum;
    g.loss_count = r.loss_count;
    g.pipeline_idle_s = r.idle_s;
  }
  if (slowdown > 1.0) {
    // The test hook's heterogeneous worker: as if its device were `slowdown` times slower.
    const auto spent = std::chrono::steady_clock::now() - compute_start;
    std::this_thread::sleep_for(
        std::chrono::duration_cast<std::chrono::microseconds>(spent * (slowdown - 1.0)));
  }
  {
    observe::TraceScope scope(trace, "grad_sync.wait", "comm");
    data_parallel.reduce_gradients();
  }
  if (!reports_loss()) g.loss_sum = 0, g.loss_count = 0;
  return g;
}

float Engine::step_dloss(double loss_scale) const {
  return static_cast<float>(grad_scale * loss_scale) * data_parallel.local_grad_factor();
}

StepOutcome Engine::train_step(int64_t step, const data::StepBatch& batch,
                               const StepRequests& asked) {
  const double loss_scale = loss_scaler ? loss_scaler->scale() : 1.0;
  const Gradients g = compute_gradients(step, batch, step_dloss(loss_scale));
  return finish_step(step, g, asked, loss_scale);
}

StepOutcome Engine::finish_step(int64_t step, const Gradients& g, const StepRequests& asked,
                                double loss_scale) {
  StepOutcome out;
  double loss_sum = g.loss_sum;
  int64_t loss_count = g.loss_count;
  out.pipeline_idle_s = g.pipeline_idle_s;
  out.stop = asked.stop;
  out.checkpoint = asked.checkpoint;
  out.all_written = asked.written;
  if (groups.world->size() > 1) {
    // One small collective agrees on the step's loss, on stopping and on checkpoints (a
    // stop signal may reach the ranks at different steps; all must act at the same one).
    float totals[5] = {static_cast<float>(loss_sum), static_cast<float>(loss_count),
                       asked.stop ? 1.0f : 0.0f, asked.checkpoint ? 1.0f : 0.0f,
                       asked.written ? 1.0f : 0.0f};
    groups.world->allreduce(totals, 5);
    loss_sum = totals[0];
    loss_count = static_cast<int64_t>(totals[1]);
    out.stop = totals[2] > 0;
    out.checkpoint = totals[3] > 0;
    out.all_written = static_cast<int>(totals[4]) == groups.world->size();
  }
  out.loss = loss_sum / static_cast<double>(loss_count);
  out.grad_norm = data_parallel.grad_norm();  // the same on every rank
  out.lr = schedule.at(step);
  double unscale = 1.0;
  if (loss_scaler && std::isfinite(out.loss)) {
    // Every rank sees the same norm, so all skip (or all step) together.
    out.loss_scale = loss_scale;
    if (!loss_scaler->update(std::isfinite(out.grad_norm))) {
      out.skipped = true;
      moe.finish_step(false);
      return out;
    }
    out.grad_norm /= loss_scale;
    unscale = 1.0 / loss_scale;
  }
  if (!std::isfinite(out.loss) || !std::isfinite(out.grad_norm)) {
    // Loss scaling only rescues the backward pass; a forward pass that left fp16's range
    // would overflow again at any scale, so skipping steps would only stall the run.
    const std::string fp16_hint =
        loss_scaler && !std::isfinite(out.loss)
            ? " In fp16 a non-finite loss means the forward pass left fp16's range (+-65504), "
              "which loss scaling cannot fix: precision.compute: bf16 has fp32's range."
            : "";
    throw std::runtime_error(
        "bad numerics at step " + std::to_string(step + 1) + ": loss " + std::to_string(out.loss) +
        ", gradient norm " + std::to_string(out.grad_norm) +
        ". Lower optimizer.lr, raise optimizer.warmup_steps or set training.grad_clip." +
        fp16_hint);
  }
  observe::TraceScope scope(trace, "optimizer", "optimizer");
  data_parallel.clip_grad_norm(out.grad_norm, options.optimizer.grad_clip, unscale);
  data_parallel.step(out.lr);
  data_parallel.after_update(step + 1, step + 1 == options.training.steps);
  moe.finish_step(true);
  return out;
}

double Engine::evaluate(bool alone, const data::Dataset* data) {
  std::vector<int32_t> tokens, targets;
  double sum = 0.0;
  int64_t count = 0;
  // Under ZeRO-3 every forward pass gathers parameters over DP, and with expert parallelism
  // it exchanges tokens over the ep group: all replicas run the same number of them, the
  // ones past the last batch on a batch whose loss is not counted.
  const int batches = options.training.eval_batches;
  const bool lockstep = data_parallel.zero3() != nullptr || groups.ep != nullptr;
  const int rounds = lockstep ? (batches + layout.dp - 1) / layout.dp : 0;
  const int first = alone ? 0 : layout.dp_rank, stride = alone ? 1 : layout.dp;
  for (int b = first; b < batches || b < rounds * layout.dp; b += stride) {
    const bool counted = b < batches;
    data::fill_eval_batch(data ? *data : *dataset, layout, counted ? b : b % batches, tokens,
                          targets);
    if (pipeline) {
      const parallel::PipelineStepResult r = pipeline->run_forward(
          {local_rows(tokens.data(), cp_tokens), local_rows(targets.data(), cp_targets)});
      if (counted) sum += r.loss_sum, count += r.loss_count;
    } else {
      int64_t n = 0;
      const double s = gpt.forward_loss(local_rows(tokens.data(), cp_tokens),
                                        local_rows(targets.data(), cp_targets), &n);
      if (counted) sum += s, count += n;
    }
  }
  if (!reports_loss()) sum = 0, count = 0;
  float totals[2] = {static_cast<float>(sum), static_cast<float>(count)};
  if (!alone && groups.world->size() > 1) groups.world->allreduce(totals, 2);
  return totals[1] > 0 ? totals[0] / totals[1] : 0.0;
}

}  // namespace trainctl::train
