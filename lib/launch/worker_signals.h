#pragma once
// How a worker learns that the job is being stopped (preemption, Ctrl-C, a failure on
// another rank): the launcher sends SIGTERM, and a worker that installed these handlers
// sees stop_requested() turn true so it can finish cleanly (checkpoint, exit
// kExitPreempted) at the next safe point. Repeated signals are the same request (Slurm
// and the launcher may both send one); a stuck worker goes away when the launcher's grace
// period ends with SIGKILL.
namespace trainctl::launch {

// Handles SIGTERM, SIGINT and SIGUSR1. Install it only in code that polls stop_requested()
// at safe points: otherwise the default action (exit at once) ends a stopped worker faster
// than the launcher's grace period would.
void install_worker_signal_handlers();

// A closed console or socket must not kill a worker with SIGPIPE; the write fails with
// EPIPE instead and surfaces as an error. Every worker calls this.
void ignore_sigpipe();

bool stop_requested();
// The signal that asked to stop, 0 if none.
int stop_signal();

}  // namespace trainctl::launch
