#pragma once
// `trainctl worker` (hidden): one worker process, started by a launcher with the
// environment of launch/worker_env.h. The worker's composition root: reads its environment
// once, connects the process groups (worker/connect.h) and runs its mode
// (worker/modes.h). The CLI only calls run_worker().
#include "launch/worker_env.h"

namespace trainctl::worker {

// Reads the environment and runs the worker. Returns the exit code: 0, kExitPreempted
// when stopped by a signal, kExitRendezvous when it could not connect, kExitBadInput when
// started without its environment (or on input only the worker finds bad), 1 otherwise.
int run_worker();

// The same with the environment already read (tests; by-hand debugging).
int run_worker(const launch::WorkerEnv& env);

}  // namespace trainctl::worker
