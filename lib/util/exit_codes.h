#pragma once
// Process exit codes: a contract with users and batch scripts (README "Exit codes").
namespace trainctl {
enum ExitCode : int {
  kExitOk = 0,            // the job finished
  kExitInternal = 1,      // a bug or an unexpected failure inside trainctl
  kExitBadInput = 2,      // bad command line or bad job spec: nothing was started
  kExitWorkerFailed = 3,  // a worker exited non-zero or died from a signal
  kExitPreempted = 4,     // stopped by SIGTERM/SIGINT/SIGUSR1 (checkpoint saved if enabled)
  kExitRendezvous = 5,    // workers could not connect (store unreachable, bad token, timeout)
  // Between a worker and its launcher only (runtime.fault_tolerance): fewer replicas than
  // min_replicas are live, so the job restarts from its checkpoint (or exits 3).
  kExitQuorumLost = 6,
};
}  // namespace trainctl
