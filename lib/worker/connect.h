#pragma once
// A worker's connections: its process groups through the rendezvous store (Gloo on CPUs,
// NCCL with device: cuda), watched for hangs.
#include <memory>
#include <string>

#include "comm/process_groups.h"
#include "config/job_spec.h"
#include "launch/watchdog.h"
#include "launch/worker_env.h"

namespace trainctl::worker {

// Connects the world, DP, TP and PP groups of `env`'s rank and wraps them so every call is
// recorded for the hang watchdog (with the stall test hook of env.hooks, if it names this
// rank). Throws RendezvousError when the peers cannot be reached.
comm::ProcessGroups connect_groups(const config::JobSpec& spec, const launch::WorkerEnv& env);

// The hang watchdog over `groups`, with its own store connection (the main client is not
// shared across threads while a blocking call may hold it). On a hang it logs the report
// and ends the worker at once with kExitWorkerFailed.
std::unique_ptr<launch::Watchdog> start_watchdog(const config::JobSpec& spec,
                                                 const launch::WorkerEnv& env,
                                                 const comm::ProcessGroups& groups);

// "world (4 ranks), dp[0] (2 ranks), ..." for the log.
std::string describe_groups(const comm::ProcessGroups& groups);

}  // namespace trainctl::worker
