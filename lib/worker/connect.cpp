#include "worker/connect.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>
#include <optional>
#include <stdexcept>

#include "comm/gloo/gloo_groups.h"
#include "comm/rank_coords.h"
#include "comm/watched_communicator.h"
#include "device/nccl_groups.h"
#include "launch/prefixed_store.h"
#include "launch/tcp_store_client.h"
#include "launch/worker_signals.h"
#include "train/spec_options.h"
#include "util/error.h"
#include "util/exit_codes.h"

namespace trainctl::worker {
namespace {

// The watchdog's own store connection: short limits, so a lost store never delays the
// timeout check for long.
constexpr std::chrono::milliseconds kWatchdogStoreTimeout{3000};

std::optional<comm::StallHook> stall_hook(const launch::WorkerEnv& env) {
  if (env.hooks.stall.empty()) return std::nullopt;
  std::optional<comm::StallHook> hook;
  try {
    hook = comm::parse_stall_hook(env.hooks.stall, env.rank);
  } catch (const std::invalid_argument& e) {
    throw InputError(std::string(launch::kStallHookVariable) + ": " + e.what());
  }
  if (hook) {
    hook->interrupted = [] { return launch::stop_requested(); };
    spdlog::warn("test hook {}: this rank will stall {} ms before {} call {} on group {}",
                 launch::kStallHookVariable, hook->duration.count(), hook->op, hook->call,
                 hook->group);
  }
  return hook;
}

// Logs the report and ends the worker at once: the main thread is stuck in the call, so
// there is no safe point to return to. The launcher reports the exit and stops the others.
[[noreturn]] void exit_on_hang(const std::string& report) {
  spdlog::error("{}", report);
  spdlog::default_logger()->flush();
  std::fflush(stderr);
  std::_Exit(kExitWorkerFailed);
}

}  // namespace

comm::ProcessGroups connect_groups(const config::JobSpec& spec, const launch::WorkerEnv& env) {
  auto client = std::make_shared<launch::TcpStoreClient>(env.store_addr, env.store_port, env.token,
                                                         train::store_options(spec));
  const comm::GlooOptions gloo = train::gloo_options(spec);
  if (spec.runtime.fault_tolerance.enabled) {
    // Fault tolerance: the groups of this worker's replica only, under a prefix of its own
    // per restart of the replica, so a replica restarts without the others
    // (train/elastic_training.h); the replicas meet in per-epoch gradient groups.
    const int replica = comm::coord_of(spec.parallel, env.rank).dp;
    auto store = std::make_shared<launch::PrefixedStore>(
        client, launch::attempt_prefix(env.restart) + "ft/replica/" + std::to_string(replica) +
                    "/" + std::to_string(env.ft_generation) + "/workers/");
    comm::ProcessGroups groups =
        comm::make_gloo_groups(store, comm::replica_layout(spec.parallel),
                               comm::replica_rank(spec.parallel, env.rank), gloo, env.node_addr);
    spdlog::info("connected: replica {} (restart {}) of {}: {}", replica, env.ft_generation,
                 spec.parallel.dp, describe_groups(groups));
    comm::watch_process_groups(groups, stall_hook(env));
    return groups;
  }
  auto store = std::make_shared<launch::PrefixedStore>(
      client, launch::attempt_prefix(env.restart) + "workers/");
  // GPUs: NCCL groups, one GPU per worker (its local rank among the visible devices).
  comm::ProcessGroups groups =
      spec.device == Device::cuda
          ? device::make_nccl_groups(store, spec.parallel, env.rank, env.local_rank, gloo.timeout)
          : comm::make_gloo_groups(store, spec.parallel, env.rank, gloo, env.node_addr);
  spdlog::info("connected: {}", describe_groups(groups));
  comm::watch_process_groups(groups, stall_hook(env));
  return groups;
}

std::unique_ptr<launch::Watchdog> start_watchdog(const config::JobSpec& spec,
                                                 const launch::WorkerEnv& env,
                                                 const comm::ProcessGroups& groups) {
  launch::StoreClientOptions options;
  options.connect_timeout = kWatchdogStoreTimeout;
  options.timeout = kWatchdogStoreTimeout;
  auto client =
      std::make_shared<launch::TcpStoreClient>(env.store_addr, env.store_port, env.token, options);
  auto store = std::make_shared<launch::PrefixedStore>(
      client, launch::attempt_prefix(env.restart) + "watchdog/");
  return std::make_unique<launch::Watchdog>(groups.progress, std::move(store),
                                            train::watchdog_options(spec, env.world_size),
                                            exit_on_hang);
}

std::string describe_groups(const comm::ProcessGroups& g) {
  std::string out;
  for (const comm::Communicator* c : {g.world.get(), g.dp.get(), g.tp.get(), g.pp.get()}) {
    if (!out.empty()) out += ", ";
    out += c->name() + " (" + std::to_string(c->size()) + " ranks)";
  }
  return out;
}

}  // namespace trainctl::worker
