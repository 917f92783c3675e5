// What the launchers of a multi-node job tell each other through the store: the reason
// the job must stop (first writer wins), and heartbeats that name a node whose launcher
// is gone and so could not say anything.
#include <spdlog/spdlog.h>

#include <thread>

#include "launch/launcher_parts.h"
#include "launch/prefixed_store.h"
#include "util/error.h"

namespace trainctl::launch::detail {

void Launcher::publish_abort(int attempt, const std::string& reason) {
  if (nnodes_ == 1) return;
  try {
    // First writer wins: the first failure is the root cause, later ones its echoes.
    const std::string prefix = attempt_prefix(attempt);
    if (store_->add(prefix + "job/abort_writers", 1) == 1) {
      store_->set_string(prefix + kAbortKey, "node " + std::to_string(node_) + ": " + reason);
    }
  } catch (const RendezvousError& e) {
    spdlog::warn("could not tell the other nodes to stop: {}", e.what());
  }
}

std::optional<std::string> Launcher::wait_for_abort(int attempt, milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  try {
    for (;;) {
      if (auto reason = abort_reason(attempt)) return reason;
      if (Clock::now() >= deadline) return std::nullopt;
      beat();
      std::this_thread::sleep_for(milliseconds(100));
    }
  } catch (const RendezvousError&) {
    return std::nullopt;  // the store is gone: report our own failure
  }
}

std::optional<std::string> Launcher::abort_reason(int attempt) {
  const std::string key = attempt_prefix(attempt) + kAbortKey;
  if (!store_->check({key})) return std::nullopt;
  return store_->get_string(key, std::chrono::seconds(5));
}

std::string stopped_responding(const std::string& names) {
  return names +
         " stopped responding (its launcher was killed, or its host went down or became "
         "unreachable)";
}

std::string Launcher::node0_gone() const {
  return "node 0 (" + opt_.cluster.master_addr + ", whose rendezvous store is gone)";
}

std::string Launcher::silent_nodes(int attempt) {
  if (node_ != 0) {
    try {
      store_->check({kAbortKey});
    } catch (const RendezvousError&) {
      return node0_gone();
    }
  }
  const std::vector<int64_t> before = beats_->sample();
  if (wait_for_abort(attempt, kNodeSilence)) return "";
  return node_names(attempt, beats_->silent_between(before, beats_->sample()));
}

std::optional<std::string> Launcher::lost_nodes(int attempt) {
  if (!beats_) return std::nullopt;
  beats_->watch(Clock::now());
  const std::vector<int> silent = beats_->silent_for(kNodeLost);
  if (silent.empty()) return std::nullopt;
  return stopped_responding(node_names(attempt, silent)) + ": no heartbeat for " +
         seconds_text(kNodeLost);
}

std::string Launcher::node_names(int attempt, const std::vector<int>& nodes) {
  std::string names;
  for (int n : nodes) {
    std::string addr;
    try {
      addr = store_->get_string(attempt_prefix(attempt) + "launcher/" + std::to_string(n),
                                milliseconds(1000));
    } catch (const RendezvousError&) {
    }
    names += (names.empty() ? "" : ", ") + ("node " + std::to_string(n)) +
             (addr.empty() ? "" : " (" + addr + ")");
  }
  return names;
}

}  // namespace trainctl::launch::detail
