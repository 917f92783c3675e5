#pragma once
// Starting one worker process and observing how it ended.
#include <signal.h>
#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace trainctl::launch {

// The file descriptor number at which global rank 0 finds the launcher's stdout
// (TRAINCTL_CONSOLE_FD).
inline constexpr int kConsoleFd = 3;

struct WorkerCommand {
  std::string exe;                                       // absolute path of the program
  std::vector<std::string> args;                         // argv[1..]
  std::vector<std::pair<std::string, std::string>> env;  // added to the launcher's own,
                                                         // whose TRAINCTL_* are dropped
  std::filesystem::path log_path;                        // stdout and stderr, appended
  bool console = false;                                  // pass the launcher's stdout as kConsoleFd
};

class WorkerProcess {
 public:
  // Forks and execs. The child gets its own process group (a terminal's Ctrl-C reaches
  // only the launcher, which forwards it), stdin from /dev/null, no inherited file
  // descriptors besides 0-2 (and kConsoleFd), the signal mask `child_mask`, and
  // PR_SET_PDEATHSIG(SIGKILL): it dies with the thread that forked it, so call this from
  // the launcher's main thread. Throws std::runtime_error when fork fails.
  WorkerProcess(int rank, const WorkerCommand& command, const sigset_t& child_mask);

  int rank() const { return rank_; }
  const std::filesystem::path& log_path() const { return log_path_; }
  // Size of the log before this process started: its own output begins there.
  std::uintmax_t log_start() const { return log_start_; }
  pid_t pid() const { return pid_; }
  bool running() const { return !status_.has_value(); }
  // Reaps the process if it has ended (non-blocking). Returns true if it has ended.
  bool poll();
  // Sends `sig` if the process is still running.
  void signal(int sig) const;
  // Only after it ended: true for exit code 0.
  bool succeeded() const;
  // Only after it ended: the exit code, or -1 when it died from a signal.
  int exit_code() const;
  // Only after it ended: the signal that killed it, or 0.
  int term_signal() const;
  // "exit code 1" or "killed by signal 9 (SIGKILL)".
  std::string describe_exit() const;

 private:
  int rank_;
  std::filesystem::path log_path_;
  std::uintmax_t log_start_ = 0;
  pid_t pid_ = -1;
  std::optional<int> status_;  // waitpid status once reaped
};

// The last `max_lines` lines of a text file from byte `from` on (logs are appended across
// runs: `from` is the size the log had when this run's worker started). Empty when the
// file cannot be read.
std::vector<std::string> tail_lines(const std::filesystem::path& file, size_t max_lines,
                                    std::uintmax_t from = 0);

}  // namespace trainctl::launch
