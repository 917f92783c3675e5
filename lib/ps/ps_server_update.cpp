// A parameter server's update rule: when the pending gradients are applied (the staleness
// rule and the grouping), how (their mean, one optimizer step at the update's share of the
// rate), and the answers the update's workers get.
#include <spdlog/spdlog.h>

#include "ps/ps_server_state.h"

namespace trainctl::ps {

std::optional<PsServer::State::Clock::time_point> PsServer::State::maybe_apply() {
  while (rule.ready()) {
    const std::optional<double> hold =
        grouping.hold_until(rule.computing(), pending_since, now_s());
    if (hold) {
      return epoch +
             std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(*hold));
    }
    apply_locked();
  }
  return std::nullopt;
}

void PsServer::State::apply_locked() {
  const StalenessRule::Applied a = rule.apply();
  pending_since = -1.0;
  const auto n = static_cast<size_t>(floats());
  // The mean of the pending gradients (each already a worker's mean), summed in worker
  // order so the result does not depend on the order they arrived in.
  set->zero_grads();
  float* g = set->grads();
  for (int w : a.workers) {
    const float* src = slots[static_cast<size_t>(w)].grad.data();
    for (size_t k = 0; k < n; ++k) g[k] += src[k];
  }
  if (a.workers.size() > 1) {
    const float inv = 1.0f / static_cast<float>(a.workers.size());
    for (size_t k = 0; k < n; ++k) g[k] *= inv;
  }
  // The update's share of the global batch scales its rate (ServerConfig::schedule).
  const double share = static_cast<double>(a.workers.size()) / config.workers;
  optimizer->step(config.schedule.at(applied / config.workers) * share);
  applied += static_cast<int64_t>(a.workers.size());
  ++updates;
  answer_applied(a);
  cv.notify_all();

  if (updates % log_every == 0) {
    spdlog::info(
        "{}: version {}, global step {}, {} gradients applied, staleness max {} over "
        "the last {} updates",
        name(), a.version, applied / config.workers, applied, window_staleness, log_every);
    window_staleness = 0;
  }
}

// Every worker's metrics count the update; each worker whose gradient it took gets its
// reply (server 0 steers: done, stop, checkpoint; the others answer with zeros).
void PsServer::State::answer_applied(const StalenessRule::Applied& a) {
  double loss_sum = 0.0;
  int64_t loss_count = 0;
  for (size_t k = 0; k < a.workers.size(); ++k) {
    const WorkerSlot& s = slots[static_cast<size_t>(a.workers[k])];
    loss_sum += s.grad_loss_sum;
    loss_count += s.grad_loss_count;
    max_staleness = std::max(max_staleness, a.staleness[k]);
    window_staleness = std::max(window_staleness, a.staleness[k]);
  }
  for (WorkerSlot& s : slots) {
    s.loss_sum += loss_sum;
    s.loss_count += loss_count;
    s.gradients += static_cast<int64_t>(a.workers.size());
    for (int64_t st : a.staleness) ++s.histogram[static_cast<size_t>(st)];
  }

  const bool steer = config.index == 0;
  const bool done = received >= config.total_steps * config.workers;
  for (int w : a.workers) {
    WorkerSlot& s = slots[static_cast<size_t>(w)];
    detail::Reply r;
    r.global_step = applied / config.workers;
    r.version = a.version;
    WorkerSlot::Applied since = s.take_applied();
    if (steer) {
      r.flags = (done ? wire::kFlagDone : 0) | (stop ? wire::kFlagStop : 0) |
                (s.checkpoint_due ? wire::kFlagCheckpoint : 0);
      r.loss_sum = since.loss_sum;
      r.loss_count = since.loss_count;
      r.ints = std::move(since.ints);
    }
    s.checkpoint_due = false;
    r.params.assign(set->data(), set->data() + floats());
    s.sent_version = a.version;
    grouping.sent(w, now_s());
    s.reply = std::move(r);
  }
}

}  // namespace trainctl::ps
