#include "launch/worker_process.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <fstream>
#include <stdexcept>

#include "launch/launcher_signals.h"

extern char** environ;

namespace trainctl::launch {
namespace {

// Async-signal-safe report of a failure between fork and exec, then exit 127.
[[noreturn]] void child_fail(const char* what) {
  const char* err = strerror(errno);  // glibc's table: no allocation for known errnos
  ssize_t ignored = ::write(2, what, strlen(what));
  ignored = ::write(2, ": ", 2);
  ignored = ::write(2, err, strlen(err));
  ignored = ::write(2, "\n", 1);
  (void)ignored;
  _exit(127);
}

}  // namespace

WorkerProcess::WorkerProcess(int rank, const WorkerCommand& command, const sigset_t& child_mask)
    : rank_(rank), log_path_(command.log_path) {
  std::error_code ec;
  log_start_ = std::filesystem::file_size(log_path_, ec);
  if (ec) log_start_ = 0;
  // Everything the child needs is built before fork: after fork in a multi-threaded
  // process only async-signal-safe calls are allowed.
  std::vector<std::string> env_strings;
  // The launcher sets the worker contract itself; only test hooks (TRAINCTL_TEST_*) pass.
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "TRAINCTL_", 9) != 0 || std::strncmp(*e, "TRAINCTL_TEST_", 14) == 0) {
      env_strings.emplace_back(*e);
    }
  }
  for (const auto& [name, value] : command.env) env_strings.push_back(name + "=" + value);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> arg_strings{command.exe};
  arg_strings.insert(arg_strings.end(), command.args.begin(), command.args.end());
  std::vector<char*> argv;
  for (auto& s : arg_strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  const std::string log_path = command.log_path.string();
  const bool console = command.console;
  const pid_t launcher = ::getpid();

  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    ::setpgid(0, 0);
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) child_fail("prctl(PR_SET_PDEATHSIG)");
    if (::getppid() != launcher) _exit(127);  // the launcher died before prctl took effect
    int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (log < 0) child_fail(log_path.c_str());
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull < 0) child_fail("/dev/null");
    // Move both above kConsoleFd so the dup2 below cannot clobber them.
    log = ::fcntl(log, F_DUPFD, 10);
    devnull = ::fcntl(devnull, F_DUPFD, 10);
    if (log < 0 || devnull < 0) child_fail("fcntl(F_DUPFD)");
    if (console && ::dup2(1, kConsoleFd) < 0) child_fail("dup2(console)");
    if (::dup2(devnull, 0) < 0 || ::dup2(log, 1) < 0 || ::dup2(log, 2) < 0) child_fail("dup2");
    ::close_range(console ? kConsoleFd + 1 : 3, ~0U, 0);
    for (int s : {SIGINT, SIGTERM, SIGUSR1, SIGPIPE, SIGCHLD}) ::signal(s, SIG_DFL);
    ::sigprocmask(SIG_SETMASK, &child_mask, nullptr);
    ::execve(argv[0], argv.data(), envp.data());
    child_fail(argv[0]);
  }
  pid_ = pid;
  ::setpgid(pid, pid);  // also from the parent, so it holds before we ever signal the group
}

bool WorkerProcess::poll() {
  if (status_) return true;
  int status = 0;
  pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    status_ = status;
    return true;
  }
  if (r < 0 && errno == ECHILD) {  // reaped elsewhere: treat as lost
    status_ = 0x7f00;              // decodes as "exit code 127"
    return true;
  }
  return false;
}

void WorkerProcess::signal(int sig) const {
  if (!status_) ::kill(pid_, sig);
}

bool WorkerProcess::succeeded() const {
  return status_ && WIFEXITED(*status_) && WEXITSTATUS(*status_) == 0;
}

int WorkerProcess::exit_code() const {
  return status_ && WIFEXITED(*status_) ? WEXITSTATUS(*status_) : -1;
}

int WorkerProcess::term_signal() const {
  return status_ && WIFSIGNALED(*status_) ? WTERMSIG(*status_) : 0;
}

std::string WorkerProcess::describe_exit() const {
  if (!status_) return "still running";
  if (WIFSIGNALED(*status_)) {
    int sig = WTERMSIG(*status_);
    return "killed by signal " + std::to_string(sig) + " (" + signal_name(sig) + ")";
  }
  return "exit code " + std::to_string(exit_code());
}

std::vector<std::string> tail_lines(const std::filesystem::path& file, size_t max_lines,
                                    std::uintmax_t from) {
  std::ifstream in(file);
  in.seekg(static_cast<std::streamoff>(from));
  std::deque<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    lines.push_back(line);
    if (lines.size() > max_lines) lines.pop_front();
  }
  return {lines.begin(), lines.end()};
}

}  // namespace trainctl::launch
