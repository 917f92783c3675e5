// Supervising one attempt: the workers' exits, the stop signals and (several nodes) the
// other nodes' abort reasons, until the attempt ends; then how it ended, with the culprit.
#include <spdlog/spdlog.h>

#include "launch/launcher_parts.h"
#include "launch/prefixed_store.h"
#include "util/error.h"
#include "util/exit_codes.h"

namespace trainctl::launch::detail {
namespace {

// A worker stopped by SIGTERM/SIGINT (or exiting with kExitPreempted) was stopped from
// outside the launcher, e.g. by Slurm signalling every process of the job.
bool stopped_from_outside(const WorkerProcess& w) {
  return w.exit_code() == kExitPreempted || w.term_signal() == SIGTERM || w.term_signal() == SIGINT;
}

}  // namespace

AttemptResult Launcher::supervise(int attempt) {
  auto next_abort_poll = Clock::now() + kAbortPoll;
  if (nnodes_ > 1) beats_.emplace(*store_, attempt_prefix(attempt) + "beat/", node_, nnodes_);
  for (;;) {
    beat();
    std::vector<const WorkerProcess*> failed;
    bool all_done = true;
    for (auto& w : workers_) {
      if (!w.poll()) {
        all_done = false;
      } else if (!w.succeeded()) {
        failed.push_back(&w);
      }
    }
    if (!failed.empty() && !restart_failed_replicas(attempt, failed)) {
      return on_workers_failed(attempt, failed);
    }
    if (all_done) return {};
    if (auto stopped = on_stop_signal(attempt)) return *stopped;
    if (nnodes_ > 1 && Clock::now() >= next_abort_poll) {
      next_abort_poll = Clock::now() + kAbortPoll;
      if (auto over = poll_other_nodes(attempt)) return *over;
    }
  }
}

AttemptResult Launcher::on_workers_failed(int attempt,
                                          const std::vector<const WorkerProcess*>& failed) {
  AttemptResult r = failure_of(failed);
  // A worker that merely exited non-zero on a multi-node job most often lost a peer
  // on another node; that node's launcher names the real cause within a poll or two.
  if (r.ending == Ending::failed && nnodes_ > 1 && r.culprit->term_signal() == 0) {
    if (auto elsewhere = wait_for_abort(attempt, kAbortPoll * 2)) {
      spdlog::error("stopping this node's workers: the job failed on {} (then this node's {})",
                    *elsewhere, r.reason);
      stop_workers(opt_.failure_grace);
      return ended(Ending::aborted_elsewhere, *elsewhere);
    }
    // No abort: maybe another node's launcher is gone and could not publish one. An
    // abort that appears meanwhile (a node that was only slow to say) wins.
    const std::string gone = silent_nodes(attempt);
    if (auto elsewhere = wait_for_abort(attempt, milliseconds(0))) {
      spdlog::error("stopping this node's workers: the job failed on {} (then this node's {})",
                    *elsewhere, r.reason);
      stop_workers(opt_.failure_grace);
      return ended(Ending::aborted_elsewhere, *elsewhere);
    }
    if (!gone.empty()) {
      r.lost_nodes = stopped_responding(gone);
      r.reason = r.lost_nodes + "; then " + r.reason;
    }
  }
  if (r.ending == Ending::failed) report_failure(r, attempt);
  publish_abort(attempt, r.reason);
  if (r.ending == Ending::preempted) {
    spdlog::warn("{}: stopping the other workers", r.reason);
    stop_workers(opt_.preempt_grace);
  } else {
    stop_workers(opt_.failure_grace);
  }
  return r;
}

// Waits up to one tick for a stop signal; with one, asks the workers (and the other
// nodes) to stop.
std::optional<AttemptResult> Launcher::on_stop_signal(int attempt) {
  const int sig = signals_.wait(kTick);
  if (sig == 0) return std::nullopt;
  AttemptResult r =
      ended(Ending::preempted, std::string("preempted: node ") + std::to_string(node_) +
                                   " received " + signal_name(sig));
  spdlog::warn("received {}: asking the workers to stop (SIGTERM; {} to finish)", signal_name(sig),
               seconds_text(opt_.preempt_grace));
  publish_abort(attempt, r.reason);
  stop_workers(opt_.preempt_grace);
  return r;
}

// Several nodes: whether another node stopped the job, another node's launcher is gone,
// or the store (node 0) is gone. However this node learns that a node's launcher died (its
// store gone, its heartbeat silent, or a worker here failing because of it), it names
// that node: the workers here may fail first, hang until the watchdog, or not notice.
std::optional<AttemptResult> Launcher::poll_other_nodes(int attempt) {
  try {
    if (auto reason = abort_reason(attempt)) {
      spdlog::error("stopping this node's workers: the job stopped on {}", *reason);
      stop_workers(opt_.failure_grace);
      bool preempted = reason->find(": preempted") != std::string::npos;
      return ended(preempted ? Ending::preempted : Ending::aborted_elsewhere, *reason);
    }
    if (auto lost = lost_nodes(attempt)) {
      if (!fault_tolerant()) return on_nodes_lost(attempt, *lost);
      // Its replicas drop out of the next epoch (their heartbeats are silent); started
      // again, its launcher rejoins the attempt (start_workers).
      if (*lost != reported_lost_) {
        spdlog::warn("fault tolerance: {}; its replicas drop out, the others keep training", *lost);
      }
      reported_lost_ = *lost;
    } else {
      reported_lost_.clear();
    }
  } catch (const RendezvousError& e) {
    if (node_ != 0) {
      spdlog::error("{}: lost the rendezvous store ({}); stopping this node's workers",
                    stopped_responding(node0_gone()), e.what());
    } else {
      spdlog::error("lost the rendezvous store ({}): stopping this node's workers", e.what());
    }
    stop_workers(opt_.failure_grace);
    return ended(Ending::store_lost, e.what());
  }
  return std::nullopt;
}

// Another node's launcher stopped beating: it cannot say why, so this node says it for
// the job (the other nodes read it as this node's abort) and stops its own workers. A
// failed attempt like any other: with runtime.max_restarts the next one waits for every
// node to join again.
AttemptResult Launcher::on_nodes_lost(int attempt, const std::string& lost) {
  spdlog::error("{}; stopping this node's workers", lost);
  publish_abort(attempt, lost);
  stop_workers(opt_.failure_grace);
  AttemptResult r = ended(Ending::failed, lost);
  r.lost_nodes = lost;
  return r;
}

AttemptResult Launcher::failure_of(const std::vector<const WorkerProcess*>& exited) {
  // The root cause is most likely a worker that died from a signal; the others of the
  // same instant usually exit 1 because their peer vanished.
  const WorkerProcess* culprit = nullptr;
  for (const auto* w : exited) {
    if (!stopped_from_outside(*w) && w->term_signal() != 0) {
      culprit = w;
      break;
    }
  }
  // Next, a worker that refused its input or environment (exit 2: a checkpoint of another
  // model, a full disk): its peers' failures at the same instant are echoes of it, and the
  // job must end with 2, not be restarted into the same wall.
  for (const auto* w : exited) {
    if (culprit == nullptr && w->exit_code() == kExitBadInput) culprit = w;
  }
  for (const auto* w : exited) {
    if (culprit == nullptr && !stopped_from_outside(*w)) culprit = w;
  }
  AttemptResult r;
  if (culprit == nullptr) {
    r.ending = Ending::preempted;
    r.reason = "preempted: " + label(exited.front()->rank()) + " was stopped (" +
               exited.front()->describe_exit() + ")";
    return r;
  }
  r.ending = Ending::failed;
  r.culprit = culprit;
  r.culprit_exit_code = culprit->exit_code();
  r.reason = label(culprit->rank()) + " on node " + std::to_string(node_) +
             " failed: " + culprit->describe_exit();
  return r;
}

// After this node's workers all succeeded. Other nodes leave at once; node 0 keeps the
// store up until every node reported success (or one failed), so no node loses the
// store while its workers are still finishing.
bool Launcher::wait_for_other_nodes(int attempt, AttemptResult& result) {
  if (nnodes_ == 1) return true;
  const std::string done_key = attempt_prefix(attempt) + "job/nodes_done";
  try {
    if (beats_) beats_->done();
    int64_t done = store_->add(done_key, 1);
    if (node_ != 0) return true;
    const auto deadline = Clock::now() + rendezvous_timeout_;
    while (done < nnodes_) {
      if (auto reason = abort_reason(attempt)) {
        result = ended(Ending::aborted_elsewhere, *reason);
        return false;
      }
      // Node 0 outlives the others' launchers: one that died while its workers ran is
      // named here too, instead of a wait until the deadline.
      if (auto lost = lost_nodes(attempt)) {
        // Fault tolerance: a node that is gone trains no replica any more; the others'
        // all finished together, so the job is done once every node still beating is.
        if (fault_tolerant() &&
            done + static_cast<int64_t>(beats_->silent_for(kNodeLost).size()) >= nnodes_) {
          spdlog::warn("fault tolerance: {}; the job finished without it", *lost);
          return true;
        }
      }
      if (auto lost = fault_tolerant() ? std::nullopt : lost_nodes(attempt)) {
        spdlog::error("{}", *lost);
        result = ended(Ending::failed, *lost);
        result.lost_nodes = *lost;
        return false;
      }
      if (Clock::now() >= deadline) {
        result = ended(Ending::failed, "only " + std::to_string(done) + " of " +
                                           std::to_string(nnodes_) + " nodes finished within " +
                                           seconds_text(rendezvous_timeout_));
        spdlog::error("{}", result.reason);
        return false;
      }
      if (int sig = signals_.wait(kTick)) {
        result = ended(Ending::preempted, std::string("received ") + signal_name(sig));
        return false;
      }
      done = store_->add(done_key, 0);
    }
  } catch (const RendezvousError& e) {
    result = ended(Ending::store_lost, e.what());
    return false;
  }
  return true;
}

}  // namespace trainctl::launch::detail
