#pragma once
// What a worker does once its process groups are connected: the body of `trainctl train`,
// `trainctl selftest` or `trainctl bench comm` in one worker. Each returns the worker's
// exit code.
#include "comm/process_groups.h"
#include "config/job_spec.h"
#include "launch/worker_env.h"

namespace trainctl::worker {

// Trains (after verifying every group's collectives, when runtime.comm_selftest is on).
int run_train_mode(const config::JobSpec& spec, comm::ProcessGroups& groups,
                   const launch::WorkerEnv& env);
// env.selftest_repeat rounds of the collective self-test (small messages only with
// env.selftest_quick), stopping between rounds on a signal.
int run_selftest_mode(comm::ProcessGroups& groups, const launch::WorkerEnv& env);
// The validation loss and bits per byte of checkpoint env.resume on the job's data
// (train/evaluate_checkpoint.h), printed by world rank 0.
int run_eval_mode(const config::JobSpec& spec, comm::ProcessGroups& groups,
                  const launch::WorkerEnv& env);
// The collective benchmark over the world group (env.bench_*), its table on the console.
int run_bench_mode(comm::ProcessGroups& groups, const launch::WorkerEnv& env);

}  // namespace trainctl::worker
