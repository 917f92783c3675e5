#pragma once
// The contract between a launcher and the workers it starts: environment variables, so a
// worker can also be started by hand or by another launcher for debugging.
//
//   TRAINCTL_RANK, TRAINCTL_LOCAL_RANK, TRAINCTL_WORLD_SIZE, TRAINCTL_NODE_RANK,
//   TRAINCTL_NNODES       this worker's place in the job
//   TRAINCTL_STORE_ADDR, TRAINCTL_STORE_PORT, TRAINCTL_TOKEN
//                         the rendezvous store (node 0) and the job token
//   TRAINCTL_NODE_ADDR    the address of this node as other nodes reach it (Gloo binds it)
//   TRAINCTL_RUN_DIR      the run directory
//   TRAINCTL_CONFIG       run_dir/config.resolved.yaml, the spec every worker loads
//   TRAINCTL_MODE         train | selftest | bench-comm | eval (TRAINCTL_RESUME: the checkpoint)
//   TRAINCTL_RESTART      attempt number, 0 for the first run (prefixes store keys)
//   TRAINCTL_PS_SERVER    only on parameter-server processes (parallel.mode:
//                         parameter_server): the server's index s; its TRAINCTL_RANK is then
//                         TRAINCTL_WORLD_SIZE + s (servers are not ranks of the workers' groups)
//   TRAINCTL_FT_GENERATION  runtime.fault_tolerance: how many times the launcher restarted
//                         this worker's replica (absent: 0, its first start)
//   TRAINCTL_CONSOLE_FD   only on global rank 0 (runtime.fault_tolerance: on each replica's
//                         first rank, the one of the primary replica reporting): a file descriptor
//                         that is the launcher's stdout, for the live progress line (workers' own
//                         stdout and stderr go to run_dir/logs/rank<R>.log)
//
// and, optional, per mode (LaunchOptions::worker_env; unset: the defaults below):
//
//   TRAINCTL_RESUME       train: --resume (auto | none | a checkpoint directory); eval: the
//                         checkpoint directory
//   TRAINCTL_SELFTEST_REPEAT, TRAINCTL_SELFTEST_QUICK   selftest: rounds; nonzero: small
//                         messages only
//   TRAINCTL_BENCH_MIN_BYTES, TRAINCTL_BENCH_MAX_BYTES, TRAINCTL_BENCH_ITERS   bench-comm
//
// and the test hooks (launch/test_hooks.h). A worker reads its environment once, here.
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "launch/test_hooks.h"

namespace trainctl::launch {

enum class WorkerMode { train, selftest, bench_comm, eval };
const char* to_string(WorkerMode mode);  // "train", "selftest", "bench-comm", "eval"

struct WorkerEnv {
  int rank = 0;
  int local_rank = 0;
  int world_size = 1;
  int node_rank = 0;
  int nnodes = 1;
  std::string store_addr = "127.0.0.1";
  int store_port = 0;
  std::string token;
  std::string node_addr = "127.0.0.1";
  std::filesystem::path run_dir;
  std::filesystem::path config;
  WorkerMode mode = WorkerMode::train;
  int restart = 0;
  int console_fd = -1;    // -1: absent (every rank but 0)
  int ps_server = -1;     // >= 0: this process is parameter server ps_server, not a worker
  int ft_generation = 0;  // runtime.fault_tolerance: restarts of this worker's replica

  std::string resume;  // "": auto
  long long selftest_repeat = 1;
  bool selftest_quick = false;
  std::optional<long long> bench_min_bytes, bench_max_bytes, bench_iters;  // unset: defaults
  TestHooks hooks;
};

// Reads the contract from this process's environment. Throws InputError naming the
// missing or malformed variable (a worker started by hand without its launcher).
WorkerEnv read_worker_env();

// The contract's variables as NAME=VALUE pairs (TRAINCTL_CONSOLE_FD only when
// console_fd >= 0; not the optional per-mode ones, which the launcher passes itself).
std::vector<std::pair<std::string, std::string>> worker_env_vars(const WorkerEnv& env);

// Sets the variables in this process's environment (for tests and by-hand debugging;
// the launcher builds the child's environment from worker_env_vars instead).
void export_worker_env(const WorkerEnv& env);

}  // namespace trainctl::launch
