#pragma once
#include "comm/process_groups.h"
#include "config/job_spec.h"
#include "launch/worker_env.h"

namespace trainctl::app {

// The body of `trainctl train` in one worker, after its process groups are connected
// (and verified, when runtime.comm_selftest is on). Returns the worker's exit code.
int run_train_mode(const config::JobSpec& spec, comm::ProcessGroups& groups,
                   const launch::WorkerEnv& env);

}  // namespace trainctl::app
