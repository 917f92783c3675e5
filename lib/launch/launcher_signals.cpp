#include "launch/launcher_signals.h"

#include <pthread.h>
#include <string.h>

#include <cerrno>

namespace trainctl::launch {
namespace {
constexpr int kStopSignals[3] = {SIGINT, SIGTERM, SIGUSR1};
}

LauncherSignals::LauncherSignals() {
  sigemptyset(&watched_);
  for (int s : kStopSignals) sigaddset(&watched_, s);
  sigaddset(&watched_, SIGCHLD);
  pthread_sigmask(SIG_BLOCK, &watched_, &original_mask_);
  for (int i = 0; i < 3; ++i) {
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(kStopSignals[i], &dfl, &original_actions_[i]);
  }
}

LauncherSignals::~LauncherSignals() {
  // Drop stop signals still pending so restoring the mask does not deliver them.
  timespec zero{0, 0};
  while (sigtimedwait(&watched_, nullptr, &zero) > 0) {
  }
  for (int i = 0; i < 3; ++i) sigaction(kStopSignals[i], &original_actions_[i], nullptr);
  pthread_sigmask(SIG_SETMASK, &original_mask_, nullptr);
}

int LauncherSignals::wait(std::chrono::milliseconds timeout) {
  auto ms = std::max<int64_t>(timeout.count(), 0);
  timespec ts{static_cast<time_t>(ms / 1000), static_cast<long>((ms % 1000) * 1000000)};
  int sig = sigtimedwait(&watched_, nullptr, &ts);
  if (sig < 0 || sig == SIGCHLD) return 0;
  return sig;
}

const char* signal_name(int sig) {
  switch (sig) {
    case SIGHUP:
      return "SIGHUP";
    case SIGINT:
      return "SIGINT";
    case SIGQUIT:
      return "SIGQUIT";
    case SIGILL:
      return "SIGILL";
    case SIGTRAP:
      return "SIGTRAP";
    case SIGABRT:
      return "SIGABRT";
    case SIGBUS:
      return "SIGBUS";
    case SIGFPE:
      return "SIGFPE";
    case SIGKILL:
      return "SIGKILL";
    case SIGUSR1:
      return "SIGUSR1";
    case SIGSEGV:
      return "SIGSEGV";
    case SIGUSR2:
      return "SIGUSR2";
    case SIGPIPE:
      return "SIGPIPE";
    case SIGALRM:
      return "SIGALRM";
    case SIGTERM:
      return "SIGTERM";
    case SIGXCPU:
      return "SIGXCPU";
    default:
      return "unnamed signal";
  }
}

}  // namespace trainctl::launch
