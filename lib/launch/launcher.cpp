// run_launcher and the attempt loop: an attempt joins the nodes, starts the workers and
// supervises them; its ending decides between a restart and the exit code (launcher.h).
// The steps themselves live in the files launcher_parts.h lists.
#include "launch/launcher.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <thread>

#include "launch/launcher_parts.h"
#include "launch/rank_map.h"
#include "util/exit_codes.h"

namespace trainctl::launch {
namespace detail {

std::string seconds_text(milliseconds ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f s", static_cast<double>(ms.count()) / 1000.0);
  return buf;
}

Launcher::Launcher(const config::JobSpec& spec, const LaunchOptions& options,
                   LauncherSignals& signals)
    : spec_(spec),
      opt_(options),
      signals_(signals),
      nnodes_(options.cluster.nnodes),
      node_(options.cluster.node_rank),
      per_node_(workers_per_node(spec.world_size(), nnodes_)),
      rendezvous_timeout_(
          milliseconds(static_cast<int64_t>(spec.runtime.comm_timeout_s * 1000.0))) {}

Launcher::~Launcher() {
  for (const auto& w : workers_) w.signal(SIGKILL);
  for (auto& w : workers_) {
    while (!w.poll()) std::this_thread::sleep_for(milliseconds(5));
  }
}

int Launcher::run() {
  prepare_run_dir();
  choose_node_addr();
  spdlog::info(
      "job '{}': world size {} (dp {} x tp {} x pp {}), node {} of {} runs {} worker(s); "
      "run dir {}",
      spec_.name, spec_.world_size(), spec_.parallel.dp, spec_.parallel.tp, spec_.parallel.pp,
      node_, nnodes_, per_node_, spec_.run_dir.string());
  if (!connect_store()) return kExitPreempted;

  for (int attempt = 0;; ++attempt) {
    if (!join_nodes(attempt)) return kExitPreempted;
    if (attempt == 0) check_shared_files();
    start_workers(attempt);
    AttemptResult r = supervise(attempt);
    if (r.ending == Ending::success && wait_for_other_nodes(attempt, r)) {
      spdlog::info("all workers finished");
      return kExitOk;
    }
    if (std::optional<int> code = conclude(r, attempt)) return *code;
  }
}

std::optional<int> Launcher::conclude(const AttemptResult& r, int attempt) {
  switch (r.ending) {
    case Ending::success:
      break;  // unreachable: wait_for_other_nodes changed the result
    case Ending::preempted:
      spdlog::warn("stopped ({}): exit code {} (preempted){}", r.reason, int{kExitPreempted},
                   killed_early_ ? "; the workers were killed before they finished stopping, "
                                   "so no stop checkpoint was written"
                                 : "");
      if (node_ == 0) spdlog::warn("{}", saved_state(spec_.run_dir));
      return kExitPreempted;
    case Ending::store_lost:
      spdlog::error("node 0's launcher is gone; the job cannot continue on this node");
      return kExitWorkerFailed;
    case Ending::failed:
    case Ending::aborted_elsewhere:
      break;
  }
  // A worker that found bad input (exit 2) would find it again after a restart.
  const int max_restarts = std::max(0, spec_.runtime.max_restarts);
  if (attempt < max_restarts && r.culprit_exit_code != kExitBadInput) {
    spdlog::warn("restarting all workers (restart {} of {})", attempt + 1, max_restarts);
    return std::nullopt;
  }
  if (node_ == 0 && nnodes_ > 1) {
    // Give the other nodes' launchers a poll interval to read the reason before the
    // store closes with this process.
    std::this_thread::sleep_for(kAbortPoll * 2);
  }
  if (r.culprit_exit_code == kExitRendezvous) return kExitRendezvous;
  if (r.culprit_exit_code == kExitBadInput) {
    restore_previous_config();
    return kExitBadInput;
  }
  return kExitWorkerFailed;
}

}  // namespace detail

int run_launcher(const config::JobSpec& spec, const LaunchOptions& options) {
  LauncherSignals signals;
  detail::Launcher launcher(spec, options, signals);
  return launcher.run();
}

}  // namespace trainctl::launch
