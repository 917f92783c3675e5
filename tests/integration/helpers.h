#pragma once
// Helpers for integration tests that run the real trainctl binary: temporary directories,
// child processes with captured output and a time limit, free ports, and a scan of
// /proc for processes left behind. Header-only: every test file includes it.
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

extern char** environ;

namespace trainctl::test {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

inline std::string read_text(const fs::path& file) {
  std::ifstream in(file);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void write_text(const fs::path& file, const std::string& text) {
  std::ofstream out(file);
  out << text;
}

// A fresh directory under $TMPDIR, removed with everything in it at scope exit.
class TempDir {
 public:
  explicit TempDir(const std::string& tag = "test") {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/trainctl-" + tag + "-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

// A port that was free a moment ago (bound to port 0 and released). Racy in principle;
// the kernel does not hand the same ephemeral port out again right away.
inline int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

struct ProcResult {
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;
  bool timed_out = false;
  double seconds = 0;
  std::string out;
  std::string err;
};

// One child process running the trainctl binary (or any program) with stdout and stderr
// captured in files. The environment is the test's own without SLURM_* and TRAINCTL_*
// (a test run inside a Slurm job must not turn into a multi-node launch), plus `env`.
// TRAINCTL_CPU_ISA passes (unless `env` sets it): tests/cpu_isa/with_isa.sh runs the
// suite again on each CPU kernel path through it.
class Proc {
 public:
  Proc(std::vector<std::string> args, const fs::path& cwd,
       std::vector<std::pair<std::string, std::string>> env = {},
       std::string program = TRAINCTL_BINARY) {
    static int counter = 0;
    const std::string tag = std::to_string(::getpid()) + "-" + std::to_string(counter++);
    out_ = cwd / (".proc-" + tag + ".out");
    err_ = cwd / (".proc-" + tag + ".err");
    std::vector<std::string> env_strings;
    bool env_sets_isa = false;
    for (auto& [k, v] : env) env_sets_isa = env_sets_isa || k == "TRAINCTL_CPU_ISA";
    for (char** e = environ; *e != nullptr; ++e) {
      const bool isa = std::strncmp(*e, "TRAINCTL_CPU_ISA=", 17) == 0;
      if ((isa && !env_sets_isa) ||
          (std::strncmp(*e, "SLURM_", 6) != 0 && std::strncmp(*e, "TRAINCTL_", 9) != 0)) {
        env_strings.emplace_back(*e);
      }
    }
    for (auto& [k, v] : env) env_strings.push_back(k + "=" + v);
    std::vector<char*> envp;
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    args.insert(args.begin(), program);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    started_ = Clock::now();
    pid_ = ::fork();
    if (pid_ == 0) {
      if (::chdir(cwd.c_str()) != 0) _exit(126);
      int out = ::open(out_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      int err = ::open(err_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (out < 0 || err < 0) _exit(126);
      ::dup2(out, 1);
      ::dup2(err, 2);
      ::execve(argv[0], argv.data(), envp.data());
      _exit(127);
    }
  }
  ~Proc() {
    if (!reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  Proc(const Proc&) = delete;
  Proc& operator=(const Proc&) = delete;

  pid_t pid() const { return pid_; }
  void signal(int sig) const { ::kill(pid_, sig); }
  std::string out() const { return read_text(out_); }
  std::string err() const { return read_text(err_); }

  // Waits for the process to end; after `limit` it is killed (SIGKILL) and the result
  // says timed_out.
  ProcResult wait(std::chrono::milliseconds limit = std::chrono::seconds(60)) {
    ProcResult r;
    const auto deadline = Clock::now() + limit;
    int status = 0;
    for (;;) {
      pid_t got = ::waitpid(pid_, &status, WNOHANG);
      if (got == pid_) break;
      if (Clock::now() >= deadline) {
        r.timed_out = true;
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    reaped_ = true;
    r.seconds = std::chrono::duration<double>(Clock::now() - started_).count();
    if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
    r.out = out();
    r.err = err();
    return r;
  }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  Clock::time_point started_;
  fs::path out_, err_;
};

inline ProcResult run_trainctl(std::vector<std::string> args, const fs::path& cwd,
                               std::chrono::milliseconds limit = std::chrono::seconds(60)) {
  Proc p(std::move(args), cwd);
  return p.wait(limit);
}

// Live processes (not zombies) whose command line or environment mentions `needle`
// (workers carry the run directory in TRAINCTL_RUN_DIR), other than this test process.
inline std::vector<pid_t> processes_mentioning(const std::string& needle) {
  std::vector<pid_t> found;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return found;
  while (dirent* d = ::readdir(proc)) {
    char* end = nullptr;
    long pid = std::strtol(d->d_name, &end, 10);
    if (*end != '\0' || pid <= 0 || pid == ::getpid()) continue;
    const fs::path dir = fs::path("/proc") / d->d_name;
    std::string stat = read_text(dir / "stat");
    size_t paren = stat.rfind(')');
    if (paren == std::string::npos || paren + 2 >= stat.size() || stat[paren + 2] == 'Z') continue;
    if (read_text(dir / "cmdline").find(needle) != std::string::npos ||
        read_text(dir / "environ").find(needle) != std::string::npos) {
      found.push_back(static_cast<pid_t>(pid));
    }
  }
  ::closedir(proc);
  return found;
}

// True while `pid` is a live process (a zombie that nobody reaped yet does not count:
// in containers the adoptive init may be slow to reap).
inline bool process_alive(pid_t pid) {
  std::string stat = read_text(fs::path("/proc") / std::to_string(pid) / "stat");
  size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] != 'Z';
}

// Polls `pred` until it holds or `limit` passes; returns its last value.
template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  while (!pred()) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

// A job spec for launch tests: the given layout, a short communication timeout so a
// broken test fails in seconds rather than minutes, written as <dir>/<name>.yaml.
inline fs::path write_job(const fs::path& dir, const std::string& name, int dp, int tp, int pp) {
  fs::path file = dir / (name + ".yaml");
  write_text(file, "name: " + name + "\nparallel: {dp: " + std::to_string(dp) +
                       ", tp: " + std::to_string(tp) + ", pp: " + std::to_string(pp) +
                       "}\nmodel: {n_head: 4, n_layer: 2}\nruntime: {comm_timeout_s: 30}\n");
  return file;
}

// The small checkpointing job the resume, run-hygiene and full-disk tests share: a 2-layer
// GPT on synthetic data, 8 steps of 8 samples, a checkpoint every 4 steps, metrics every
// step; `parallel`, `checkpoint` and `runtime` are those sections as YAML flow maps.
// Written as <dir>/job.yaml.
struct SmallJob {
  std::string name = "small";
  std::string parallel = "{dp: 1}";
  std::string checkpoint = "{every_steps: 4, async: false}";
  std::string runtime = "{comm_timeout_s: 60, max_restarts: 1}";
};
inline fs::path write_small_job(const fs::path& dir, const SmallJob& job) {
  const fs::path file = dir / "job.yaml";
  write_text(file, "name: " + job.name + "\nseed: 5\n" +
                       "model: {vocab_size: 64, seq_len: 16, n_layer: 2, n_head: 4, d_model: 32}\n"
                       "data: {type: synthetic}\n"
                       "parallel: " +
                       job.parallel + "\n" +
                       "training: {steps: 8, micro_batch_size: 2, global_batch_size: 8}\n"
                       "optimizer: {lr: 1.0e-2, warmup_steps: 2}\n"
                       "checkpoint: " +
                       job.checkpoint + "\n" +
                       "logging: {every_steps: 1}\n"
                       "runtime: " +
                       job.runtime + "\n");
  return file;
}

// The pid a worker logged in its "worker started: pid N" line (the last one), or -1.
inline pid_t worker_pid_from_log(const fs::path& log) {
  std::string text = read_text(log);
  size_t at = text.rfind("worker started: pid ");
  if (at == std::string::npos) return -1;
  return static_cast<pid_t>(std::atol(text.c_str() + at + std::strlen("worker started: pid ")));
}

}  // namespace trainctl::test
