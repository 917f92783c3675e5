#include "train/step_stats.h"

#include <algorithm>

#include "comm/rank_coords.h"
#include "util/process_memory.h"

namespace trainctl::train {

namespace {

// Each pipeline stage's wait for its neighbours per step of the window, gathered to every rank (a
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

// The gradient communication over the DP group per step of the window, seen from both
// ends: the rank whose backward pass finished last sets the step time and waits only for
// the part of the communication its backward could not hide; the others also wait for it
// (load imbalance, not communication). So exposed_comm_ms is the minimum over the DP ranks
// and dp_wait_max_ms the maximum (a collective over DP: all ranks call it on the same
// steps, when the gradient reduction has finished and the group is idle).
void add_dp_comm_stats(Engine& e, const StepSample& mine, StepMetrics& m) {
  // max of negated values gives the minima: one collective for both.
  float v[4] = {static_cast<float>(-mine.comm_s), static_cast<float>(-mine.exposed_s),
                static_cast<float>(mine.comm_s), static_cast<float>(mine.exposed_s)};
  e.groups.dp->allreduce(v, 4, comm::ReduceOp::max);
  m.comm_ms = -v[0] * 1e3;
  m.exposed_comm_ms = -v[1] * 1e3;
  m.dp_wait_max_ms = v[3] * 1e3;
}

constexpr double kMiB = 1 << 20;

// Every world rank's tensor-allocator peak, gathered to every rank (a collective over the
// world: all ranks call it on the same steps).
void add_memory_stats(Engine& e, StepMetrics& m) {
  comm::Communicator& world = *e.groups.world;
  const auto mine = static_cast<float>(m.mem_peak_mb);
  std::vector<float> all(static_cast<size_t>(world.size()));
  if (world.size() > 1) {
    world.allgather(&mine, all.data(), 1);
  } else {
    all[0] = mine;
  }
  m.mem_peak_mb_ranks.assign(all.begin(), all.end());
  double most = 0;
  for (double mb : m.mem_peak_mb_ranks) most = std::max(most, mb);
  m.mem_peak_mb_max = most;
}

void add_pipeline_stats(Engine& e, double idle_s, StepMetrics& m) {
  m.pipeline_idle_ms = gather_pipeline_idle_ms(e, idle_s);
  double idle = 0;
  for (double ms : m.pipeline_idle_ms) idle += ms;
  m.pipeline_bubble = idle / (static_cast<double>(m.pipeline_idle_ms.size()) * m.step_ms);
}

// This step's own figures, added to the window.
void add_to_window(Engine& e, const StepOutcome& out, StepTimer& timer) {
  const parallel::StepCommStats comm = e.data_parallel.stats();
  timer.window().add(StepSample{.step_ms = timer.step_ms(),
                                .comm_s = comm.comm_s,
                                .exposed_s = comm.exposed_s,
                                .pipeline_idle_s = out.pipeline_idle_s,
                                .sent_bytes = static_cast<int64_t>(comm.sent_bytes)});
}

}  // namespace

StepMetrics measure_step(Engine& e, const StepOutcome& out, int64_t step, StepTimer& timer,
                         bool logged) {
  add_to_window(e, out, timer);
  const StepSample mean = timer.window().mean();
  StepMetrics m;
  m.step = step;
  m.total_steps = e.options.training.steps;
  m.loss = out.loss;
  m.lr = out.lr;
  m.grad_norm = out.grad_norm;
  m.step_ms = mean.step_ms;
  m.elapsed_s = timer.elapsed_s();
  m.optimizer_state_mb = static_cast<double>(e.data_parallel.optimizer_state_bytes()) / (1 << 20);
  if (e.loss_scaler) m.loss_scale = out.loss_scale;
  m.skipped = out.skipped;
  m.comm_bytes = mean.sent_bytes;
  m.comm_bytes_window = timer.window().total().sent_bytes;
  m.mem_peak_mb = static_cast<double>(e.backend->peak_allocated_bytes()) / kMiB;
  if (comm::RingExchange* ring = e.gpt.cp_ring()) {  // since the last step's measurement
    const comm::RingExchange::Times t = ring->times();
    ring->reset_times();
    m.cp_ring_ms = t.busy_s * 1e3;
    m.cp_ring_exposed_ms = t.waited_s * 1e3;
  }
  if (e.backend->device() == Device::cuda) m.device_mem_peak_mb = m.mem_peak_mb;
  if (!logged) return m;
  if (const std::optional<size_t> rss = peak_rss_bytes()) {
    m.mem_rss_peak_mb = static_cast<double>(*rss) / kMiB;
  }
  add_memory_stats(e, m);
  if (e.groups.dp->size() > 1) add_dp_comm_stats(e, mean, m);
  if (e.pipeline) add_pipeline_stats(e, mean.pipeline_idle_s, m);
  if (e.moe.active()) {
    MoeFigures f = e.moe.gather_window(e.groups);
    m.moe_aux_loss = f.aux_loss;
    m.moe_load_imbalance = std::move(f.load_imbalance);
    m.moe_expert_load = std::move(f.expert_load);
    m.moe_dropped_fraction = f.dropped_fraction;
  }
  return m;
}

}  // namespace trainctl::train
