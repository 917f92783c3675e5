#pragma once
// The launcher takes SIGINT, SIGTERM and SIGUSR1 (Slurm's preemption warning) and SIGCHLD
// synchronously: they are blocked in every thread and collected with sigtimedwait from
// the supervision loop, so no handler runs in the middle of a fork or a store call.
#include <signal.h>

#include <chrono>

namespace trainctl::launch {

class LauncherSignals {
 public:
  // Blocks the signals in the calling thread. Construct it before starting any thread
  // (threads inherit the mask). Also resets SIGINT/SIGTERM/SIGUSR1 to their default
  // action, since a shell that starts us in the background ignores SIGINT and an ignored
  // signal would never be seen pending.
  LauncherSignals();
  ~LauncherSignals();  // restores the previous mask and actions
  LauncherSignals(const LauncherSignals&) = delete;
  LauncherSignals& operator=(const LauncherSignals&) = delete;

  // Waits up to `timeout` for a signal. Returns the stop signal (SIGINT, SIGTERM,
  // SIGUSR1) if one arrived, 0 on SIGCHLD or timeout.
  int wait(std::chrono::milliseconds timeout);

  // The mask to restore in a child before exec.
  const sigset_t& original_mask() const { return original_mask_; }

 private:
  sigset_t watched_{};
  sigset_t original_mask_{};
  struct sigaction original_actions_[3] = {};
};

// "SIGKILL" for 9; "signal N" when the number has no name.
const char* signal_name(int sig);

}  // namespace trainctl::launch
