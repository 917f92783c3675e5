// Starting this node's workers (and, in parameter-server mode, node 0's servers) with the
// environment of the launcher-worker contract (launch/worker_env.h), and stopping them:
// SIGTERM, a grace period, then SIGKILL.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <climits>
#include <stdexcept>
#include <thread>

#include "comm/rank_coords.h"
#include "launch/launcher_parts.h"

namespace trainctl::launch::detail {
namespace {

std::string self_exe() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) throw std::runtime_error("cannot resolve /proc/self/exe");
  return std::string(buf, static_cast<size_t>(n));
}

}  // namespace

// What every process this launcher starts in `attempt` shares (the rest is per rank).
WorkerEnv Launcher::node_env(int attempt, int port) const {
  WorkerEnv env;
  env.world_size = spec_.world_size();
  env.node_rank = node_;
  env.nnodes = nnodes_;
  env.store_addr = store_addr_;
  env.store_port = port;
  env.token = token_;
  env.node_addr = node_addr_;
  env.run_dir = spec_.run_dir;
  env.config = spec_.run_dir / "config.resolved.yaml";
  env.mode = opt_.mode;
  env.restart = attempt;
  return env;
}

// `<exe> worker` with `env` and the caller's extra variables, logging to logs/<log_name>.
WorkerCommand Launcher::command_for(const WorkerEnv& env, const std::string& exe,
                                    const std::string& log_name) const {
  WorkerCommand cmd;
  cmd.exe = exe;
  cmd.args = {"worker"};
  cmd.env = worker_env_vars(env);
  cmd.env.insert(cmd.env.end(), opt_.worker_env.begin(), opt_.worker_env.end());
  cmd.log_path = spec_.run_dir / "logs" / log_name;
  return cmd;
}

void Launcher::start_workers(int attempt) {
  const std::string exe = opt_.worker_exe.empty() ? self_exe() : opt_.worker_exe;
  const int port = server_ ? server_->port() : opt_.cluster.master_port;
  workers_.clear();
  workers_.reserve(static_cast<size_t>(per_node_ + spec_.parallel.ps_servers));
  replica_restarts_.assign(static_cast<size_t>(spec_.parallel.dp), 0);
  std::vector<int> generation(static_cast<size_t>(spec_.parallel.dp), -1);
  for (int local = 0; local < per_node_; ++local) {
    int g = 0;
    if (fault_tolerant()) {
      const int replica = comm::coord_of(spec_.parallel, node_ * per_node_ + local).dp;
      int& known = generation[static_cast<size_t>(replica)];
      if (known < 0) known = starting_generation(attempt, replica);
      g = known;
    }
    workers_.push_back(spawn_worker(attempt, local, g));
  }
  spdlog::info("started {} worker(s) for ranks {}..{} (attempt {}); logs in {}", per_node_,
               node_ * per_node_, node_ * per_node_ + per_node_ - 1, attempt,
               (spec_.run_dir / "logs").string());
  // Only training talks to servers: eval, selftest and bench-comm of the same job would
  // leave them waiting for workers that never come (issue 36).
  if (spec_.parallel.mode == "parameter_server" && node_ == 0 && opt_.mode == WorkerMode::train) {
    start_servers(attempt, exe, port);
  }
}

WorkerProcess Launcher::spawn_worker(int attempt, int local, int generation) {
  const std::string exe = opt_.worker_exe.empty() ? self_exe() : opt_.worker_exe;
  const int port = server_ ? server_->port() : opt_.cluster.master_port;
  WorkerEnv env = node_env(attempt, port);
  env.rank = node_ * per_node_ + local;
  env.local_rank = local;
  // Fault tolerance: every replica's leader may become the one that reports.
  const bool console =
      env.rank == 0 || (spec_.runtime.fault_tolerance.enabled && opt_.mode == WorkerMode::train &&
                        comm::replica_rank(spec_.parallel, env.rank) == 0);
  env.console_fd = console ? kConsoleFd : -1;
  env.ft_generation = generation;
  WorkerCommand cmd = command_for(env, exe, "rank" + std::to_string(env.rank) + ".log");
  cmd.console = console;
  return WorkerProcess(env.rank, cmd, signals_.original_mask());
}

// parallel.mode: parameter_server: the servers run on node 0 beside its workers, as
// processes supervised like them (a server that dies fails the attempt, which restarts
// from the last checkpoint like any other failure). They are `trainctl worker` with
// TRAINCTL_PS_SERVER set, ranks world_size + s in the launcher's accounting only.
void Launcher::start_servers(int attempt, const std::string& exe, int port) {
  const int servers = spec_.parallel.ps_servers;
  for (int s = 0; s < servers; ++s) {
    WorkerEnv env = node_env(attempt, port);
    env.rank = spec_.world_size() + s;
    env.local_rank = per_node_ + s;
    env.ps_server = s;
    workers_.emplace_back(env.rank, command_for(env, exe, "server" + std::to_string(s) + ".log"),
                          signals_.original_mask());
  }
  spdlog::info("started {} parameter server(s) (attempt {}); logs in {}/server<S>.log", servers,
               attempt, (spec_.run_dir / "logs").string());
}

std::string Launcher::label(int rank) const {
  if (rank >= spec_.world_size()) {
    return "parameter server " + std::to_string(rank - spec_.world_size());
  }
  return "rank " + std::to_string(rank);
}

void Launcher::stop_workers(milliseconds grace) {
  for (const auto& w : workers_) w.signal(SIGTERM);
  const auto deadline = Clock::now() + grace;
  auto any_running = [&] {
    bool running = false;
    for (auto& w : workers_) running = !w.poll() || running;
    return running;
  };
  bool hurried = false;
  while (any_running() && Clock::now() < deadline) {
    beat();
    if (int sig = signals_.wait(milliseconds(50))) {
      spdlog::warn("received {} again: killing the workers now (no waiting for a checkpoint)",
                   signal_name(sig));
      hurried = true;
      killed_early_ = true;
      break;
    }
  }
  bool killed = false;
  for (const auto& w : workers_) {
    if (w.running()) {
      w.signal(SIGKILL);
      killed = true;
    }
  }
  if (killed && !hurried) {
    spdlog::warn("workers still running after {}: sent SIGKILL", seconds_text(grace));
  }
  while (any_running()) std::this_thread::sleep_for(milliseconds(10));
}

}  // namespace trainctl::launch::detail
