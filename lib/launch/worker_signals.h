#pragma once
// How a worker learns that the job is being stopped (preemption, Ctrl-C, a failure on
// another rank): the launcher sends SIGTERM, and a worker that installed these handlers
// sees stop_requested() turn true so it can finish cleanly (checkpoint, exit
// kExitPreempted) at the next safe point. A second signal of the same kind takes its
// default action (the process dies), so a stuck worker still goes away.
namespace trainctl::launch {

// Handles SIGTERM, SIGINT and SIGUSR1; ignores SIGPIPE (a closed console must not kill
// a worker; broken sockets surface as errors instead).
void install_worker_signal_handlers();

bool stop_requested();
// The signal that asked to stop, 0 if none.
int stop_signal();

}  // namespace trainctl::launch
