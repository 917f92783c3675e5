#include "worker/worker.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <memory>

#include "comm/communicator.h"
#include "config/load.h"
#include "launch/console.h"
#include "launch/ft_quorum.h"
#include "launch/watchdog.h"
#include "launch/worker_signals.h"
#include "util/error.h"
#include "util/exit_codes.h"
#include "util/log.h"
#include "worker/connect.h"
#include "worker/modes.h"
#include "worker/ps_server_mode.h"

namespace trainctl::worker {
namespace {

int run_mode(const launch::WorkerEnv& env) {
  config::JobSpec spec = config::load_job_spec(env.config, {});
  comm::ProcessGroups groups = connect_groups(spec, env);
  // The benchmark times the transport alone and may legitimately run long messages.
  std::unique_ptr<launch::Watchdog> watchdog;
  // Fault tolerance: a replica's hang ends by Gloo's timeout (runtime.comm_timeout_s) and
  // its peers' heartbeat timeout; the watchdog's report spans the whole world's ranks.
  if (env.mode != launch::WorkerMode::bench_comm && !spec.runtime.fault_tolerance.enabled) {
    watchdog = start_watchdog(spec, env, groups);
  }

  try {
    switch (env.mode) {
      case launch::WorkerMode::selftest:
        return run_selftest_mode(groups, env);
      case launch::WorkerMode::bench_comm:
        return run_bench_mode(groups, env);
      case launch::WorkerMode::eval:
        return run_eval_mode(spec, groups, env);
      case launch::WorkerMode::train:
        return run_train_mode(spec, groups, env);
    }
  } catch (const comm::CommError&) {
    // Gloo gave up before the watchdog (or outside its reach): say where this rank was.
    // Not when the launcher stopped us: peers going away is then the expected outcome.
    if (!launch::stop_requested()) {
      spdlog::error("progress of this rank at the failure: {}",
                    groups.progress->snapshot().describe());
    }
    throw;
  }
  return kExitInternal;
}

}  // namespace

int run_worker() {
  launch::WorkerEnv env;
  try {
    env = launch::read_worker_env();
  } catch (const InputError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return kExitBadInput;
  }
  return run_worker(env);
}

int run_worker(const launch::WorkerEnv& env) {
  if (env.ps_server >= 0) return run_ps_server(env);
  log::init(env.rank, env.world_size);
  launch::ignore_sigpipe();
  // The self-test (between rounds) and the training engine (between steps) poll
  // stop_requested() and stop at a safe point; the benchmark keeps SIGTERM's default
  // action, ending at once instead of after the launcher's grace period.
  if (env.mode != launch::WorkerMode::bench_comm) launch::install_worker_signal_handlers();
  spdlog::info("worker started: pid {}, node {}, local rank {}, mode {}, attempt {}", ::getpid(),
               env.node_rank, env.local_rank, launch::to_string(env.mode), env.restart);
  try {
    int code = run_mode(env);
    if (code == kExitOk) spdlog::info("worker finished");
    return code;
  } catch (const launch::QuorumLost& e) {
    spdlog::error("fault tolerance: {}: stopping for a restart from the checkpoint", e.what());
    return kExitQuorumLost;
  } catch (const RendezvousError& e) {
    spdlog::error("worker failed to connect: {}", e.what());
    return kExitRendezvous;
  } catch (const InputError& e) {
    // Bad input found only in the worker (e.g. --resume names a damaged checkpoint): the
    // launcher must not restart into the same error.
    spdlog::error("worker failed: {}", e.what());
    // Rank 0 also tells the user directly: its log may be the one thing that could not be
    // written (a full disk), and the launcher may report another rank's echo of it first.
    launch::write_console(env.console_fd, std::string("error: ") + e.what() + "\n");
    return kExitBadInput;
  } catch (const std::exception& e) {
    if (launch::stop_requested()) {
      // Peers that were stopped first make our collectives fail: a consequence of the
      // stop, not a failure of its own.
      spdlog::warn("stopped (signal {}) during: {}", launch::stop_signal(), e.what());
      return kExitPreempted;
    }
    spdlog::error("worker failed: {}", e.what());
    return kExitInternal;
  }
}

}  // namespace trainctl::worker
