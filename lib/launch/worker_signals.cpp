#include "launch/worker_signals.h"

#include <signal.h>

#include <atomic>

namespace trainctl::launch {
namespace {
// Signal handlers can only talk to the program through a lock-free global: the one
// piece of process-wide state in this layer, written only by the handler.
std::atomic<int> g_stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void on_stop_signal(int sig) { g_stop_signal.store(sig, std::memory_order_relaxed); }
}  // namespace

void install_worker_signal_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  // Repeated stop signals are one request: under Slurm both srun and our launcher
  // deliver SIGTERM, and a worker killed by the second would lose its stop checkpoint.
  // The launcher escalates to SIGKILL itself when its grace period ends.
  sa.sa_flags = SA_RESTART;
  for (int s : {SIGTERM, SIGINT, SIGUSR1}) sigaction(s, &sa, nullptr);
}

void ignore_sigpipe() { signal(SIGPIPE, SIG_IGN); }

bool stop_requested() { return g_stop_signal.load(std::memory_order_relaxed) != 0; }

int stop_signal() { return g_stop_signal.load(std::memory_order_relaxed); }

}  // namespace trainctl::launch
