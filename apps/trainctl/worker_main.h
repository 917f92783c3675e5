#pragma once

namespace trainctl::app {

// `trainctl worker` (hidden): one worker process, started by a launcher with the
// environment of launch/worker_env.h. Connects the process groups and runs the mode.
// Returns the exit code: 0, kExitPreempted when stopped by a signal, kExitRendezvous when
// it could not connect, kExitBadInput when started without its environment, 1 otherwise.
int run_worker();

}  // namespace trainctl::app
