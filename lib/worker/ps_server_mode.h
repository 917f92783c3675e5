#pragma once
// A parameter-server process (parallel.mode: parameter_server; TRAINCTL_PS_SERVER set):
// builds server env.ps_server from the job spec, publishes its address in the rendezvous
// store for the workers, and serves until every worker has said goodbye. Returns the
// process's exit code.
#include "launch/worker_env.h"

namespace trainctl::worker {

int run_ps_server(const launch::WorkerEnv& env);

// The store key under which server `index` of launch attempt `restart` publishes
// "host:port" (the workers wait for it).
std::string ps_server_key(int restart, int index);

}  // namespace trainctl::worker
