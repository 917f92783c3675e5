// runtime.fault_tolerance: a failed worker's replica (its tp x pp x cp ranks on this node)
// is killed and started again alone, as the next generation, while the other replicas
// keep training (train/elastic_training.h); its death is counted in the store at once so
// the survivors need not wait for its heartbeat to go silent (launch/ft_quorum.h).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <thread>

#include "comm/rank_coords.h"
#include "launch/ft_quorum.h"
#include "launch/launcher_parts.h"
#include "launch/prefixed_store.h"
#include "util/error.h"
#include "util/exit_codes.h"

namespace trainctl::launch::detail {

int Launcher::starting_generation(int attempt, int replica) {
  if (store_->add(attempt_prefix(attempt) + "ft/latest", 0) == 0) return 0;  // a new attempt
  const int g = static_cast<int>(store_->add(attempt_prefix(attempt) + dead_key(replica), 1));
  spdlog::warn("fault tolerance: rejoining a running job: replica {} starts as restart {}", replica,
               g);
  return g;
}

bool Launcher::restart_failed_replicas(int attempt,
                                       const std::vector<const WorkerProcess*>& failed) {
  const config::FaultToleranceSpec& ft = spec_.runtime.fault_tolerance;
  if (!fault_tolerant()) return false;
  std::vector<int> replicas;
  for (const WorkerProcess* w : failed) {
    // Exits that a restart would meet again, or that the replicas chose together.
    const int code = w->exit_code();
    if (code == kExitBadInput || code == kExitQuorumLost || code == kExitRendezvous ||
        code == kExitPreempted || w->term_signal() == SIGTERM || w->term_signal() == SIGINT) {
      return false;
    }
    const int replica = comm::coord_of(spec_.parallel, w->rank()).dp;
    if (std::find(replicas.begin(), replicas.end(), replica) == replicas.end()) {
      replicas.push_back(replica);
    }
  }
  for (int replica : replicas) {
    int& restarts = replica_restarts_[static_cast<size_t>(replica)];
    if (restarts >= ft.max_replica_restarts) {
      spdlog::error(
          "fault tolerance: replica {} failed again after {} restart(s) "
          "(runtime.fault_tolerance.max_replica_restarts)",
          replica, restarts);
      return false;
    }
  }
  for (int replica : replicas) {
    int generation = 0;
    try {
      generation = static_cast<int>(store_->add(attempt_prefix(attempt) + dead_key(replica), 1));
    } catch (const RendezvousError& e) {
      spdlog::error("fault tolerance: cannot count replica {}'s failure: {}", replica, e.what());
      return false;
    }
    std::string why;
    std::vector<size_t> mine;
    for (size_t i = 0; i < workers_.size(); ++i) {
      const WorkerProcess& w = workers_[i];
      if (w.rank() >= spec_.world_size()) continue;
      if (comm::coord_of(spec_.parallel, w.rank()).dp != replica) continue;
      mine.push_back(i);
      if (!w.running() && !w.succeeded() && why.empty()) {
        why = label(w.rank()) + " " + w.describe_exit();
      }
      w.signal(SIGKILL);  // its peers inside the replica cannot go on without it
    }
    for (size_t i : mine) {
      while (!workers_[i].poll()) std::this_thread::sleep_for(milliseconds(2));
    }
    ++replica_restarts_[static_cast<size_t>(replica)];
    spdlog::warn(
        "fault tolerance: replica {} failed ({}); restarting its {} worker(s) on this node "
        "(restart {} of at most {}); the other replicas keep training",
        replica, why, mine.size(), replica_restarts_[static_cast<size_t>(replica)],
        ft.max_replica_restarts);
    for (size_t i : mine) {
      workers_[i] = spawn_worker(attempt, workers_[i].rank() - node_ * per_node_, generation);
    }
  }
  return true;
}

}  // namespace trainctl::launch::detail
