#include "worker_main.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>

#include "comm/bench_comm.h"
#include "comm/gloo/gloo_groups.h"
#include "comm/self_test.h"
#include "comm/watched_communicator.h"
#include "config/load.h"
#include "device/nccl_groups.h"
#include "launch/console.h"
#include "launch/prefixed_store.h"
#include "launch/tcp_store_client.h"
#include "launch/watchdog.h"
#include "launch/worker_env.h"
#include "launch/worker_signals.h"
#include "train/spec_options.h"
#include "train_mode.h"
#include "util/error.h"
#include "util/exit_codes.h"
#include "util/log.h"

namespace trainctl::app {
namespace {

// Optional numeric settings the launcher passes for some modes (selftest repeat count,
// benchmark sizes); `fallback` when unset.
long long env_number(const char* name, long long fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  long long value = 0;
  auto [end, ec] = std::from_chars(v, v + std::strlen(v), value);
  if (ec != std::errc() || *end != '\0' || value < 0) {
    throw InputError(std::string("environment variable ") + name + "='" + v +
                     "' is not a non-negative integer");
  }
  return value;
}

// `selftest --quick`: only messages up to this many floats (wiring, not bandwidth paths).
constexpr size_t kQuickSelfTestMaxCount = 4096;

// The watchdog's own store connection: short limits, so a lost store never delays the
// timeout check for long.
constexpr std::chrono::milliseconds kWatchdogStoreTimeout{3000};

// Test hook (comm/watched_communicator.h, StallHook): not a TRAINCTL_ variable because
// the launcher does not pass those on to workers.
constexpr const char* kStallHookVariable = "TEST_TRAINCTL_STALL";

std::optional<comm::StallHook> stall_hook_from_env(int rank) {
  const char* spec = std::getenv(kStallHookVariable);
  if (spec == nullptr || *spec == '\0') return std::nullopt;
  std::optional<comm::StallHook> hook;
  try {
    hook = comm::parse_stall_hook(spec, rank);
  } catch (const std::invalid_argument& e) {
    throw InputError(std::string(kStallHookVariable) + ": " + e.what());
  }
  if (hook) {
    hook->interrupted = [] { return launch::stop_requested(); };
    spdlog::warn("test hook {}: this rank will stall {} ms before {} call {} on group {}",
                 kStallHookVariable, hook->duration.count(), hook->op, hook->call, hook->group);
  }
  return hook;
}

// Logs the report and ends the worker at once: the main thread is stuck in the call, so
// there is no safe point to return to. The launcher reports the exit and stops the others.
[[noreturn]] void exit_on_hang(const std::string& report) {
  spdlog::error("{}", report);
  spdlog::default_logger()->flush();
  std::fflush(stderr);
  std::_Exit(kExitWorkerFailed);
}

// The watchdog, with its own store connection (the main client is not shared across
// threads while a blocking call may hold it).
std::unique_ptr<launch::Watchdog> start_watchdog(const config::JobSpec& spec,
                                                 const launch::WorkerEnv& env,
                                                 const comm::ProcessGroups& groups) {
  launch::StoreClientOptions options;
  options.connect_timeout = kWatchdogStoreTimeout;
  options.timeout = kWatchdogStoreTimeout;
  auto client =
      std::make_shared<launch::TcpStoreClient>(env.store_addr, env.store_port, env.token, options);
  auto store = std::make_shared<launch::PrefixedStore>(
      client, launch::attempt_prefix(env.restart) + "watchdog/");
  return std::make_unique<launch::Watchdog>(groups.progress, std::move(store),
                                            train::watchdog_options(spec, env.world_size),
                                            exit_on_hang);
}

std::string describe_groups(const comm::ProcessGroups& g) {
  std::string out;
  for (const comm::Communicator* c : {g.world.get(), g.dp.get(), g.tp.get(), g.pp.get()}) {
    if (!out.empty()) out += ", ";
    out += c->name() + " (" + std::to_string(c->size()) + " ranks)";
  }
  return out;
}

int run_selftest_mode(comm::ProcessGroups& groups, const launch::WorkerEnv& env) {
  const long long repeat = std::max(1LL, env_number("TRAINCTL_SELFTEST_REPEAT", 1));
  comm::SelfTestOptions options;
  if (env_number("TRAINCTL_SELFTEST_QUICK", 0) != 0) {
    std::erase_if(options.counts, [](size_t n) { return n > kQuickSelfTestMaxCount; });
  }
  for (long long i = 1; i <= repeat; ++i) {
    if (launch::stop_requested()) {
      spdlog::warn("stopping after {} of {} self-test rounds: received signal {}", i - 1, repeat,
                   launch::stop_signal());
      return kExitPreempted;
    }
    comm::run_collective_self_test(groups, options);
    spdlog::info("self-test round {}/{} passed: verified {}", i, repeat, describe_groups(groups));
  }
  launch::write_console(env.console_fd, "selftest passed: " + std::to_string(env.world_size) +
                                            " ranks (dp " + std::to_string(groups.layout.dp) +
                                            " x tp " + std::to_string(groups.layout.tp) + " x pp " +
                                            std::to_string(groups.layout.pp) + "), " +
                                            std::to_string(repeat) +
                                            " round(s), every group's collectives verified\n");
  return kExitOk;
}

int run_bench_mode(comm::ProcessGroups& groups, const launch::WorkerEnv& env) {
  comm::BenchOptions options;
  options.min_bytes = static_cast<size_t>(
      env_number("TRAINCTL_BENCH_MIN_BYTES", static_cast<long long>(options.min_bytes)));
  options.max_bytes = static_cast<size_t>(
      env_number("TRAINCTL_BENCH_MAX_BYTES", static_cast<long long>(options.max_bytes)));
  options.iters = static_cast<int>(env_number("TRAINCTL_BENCH_ITERS", options.iters));
  std::vector<comm::BenchRow> rows = comm::bench_collectives(*groups.world, options);
  std::string table = comm::format_bench_table(rows);
  spdlog::info("collective benchmark over {} ranks:\n{}", groups.world->size(), table);
  launch::write_console(env.console_fd,
                        "# trainctl bench comm: " + std::to_string(groups.world->size()) +
                            " ranks, Gloo over TCP, shared memory where algo says shm\n" + table);
  return kExitOk;
}

int run_mode(const launch::WorkerEnv& env) {
  config::JobSpec spec = config::load_job_spec(env.config, {});
  auto client = std::make_shared<launch::TcpStoreClient>(env.store_addr, env.store_port, env.token,
                                                         train::store_options(spec));
  auto store = std::make_shared<launch::PrefixedStore>(
      client, launch::attempt_prefix(env.restart) + "workers/");
  const comm::GlooOptions gloo = train::gloo_options(spec);
  // GPUs: NCCL groups, one GPU per worker (its local rank among the visible devices).
  comm::ProcessGroups groups =
      spec.device == Device::cuda
          ? device::make_nccl_groups(store, spec.parallel, env.rank, env.local_rank, gloo.timeout)
          : comm::make_gloo_groups(store, spec.parallel, env.rank, gloo, env.node_addr);
  spdlog::info("connected: {}", describe_groups(groups));
  comm::watch_process_groups(groups, stall_hook_from_env(env.rank));

  // The benchmark times the transport alone and may legitimately run long messages.
  std::unique_ptr<launch::Watchdog> watchdog;
  if (env.mode != launch::WorkerMode::bench_comm) watchdog = start_watchdog(spec, env, groups);

  try {
    switch (env.mode) {
      case launch::WorkerMode::selftest:
        return run_selftest_mode(groups, env);
      case launch::WorkerMode::bench_comm:
        return run_bench_mode(groups, env);
      case launch::WorkerMode::train:
        if (spec.runtime.comm_selftest) {
          comm::run_collective_self_test(groups);
          spdlog::info("collective self-test passed: verified {}", describe_groups(groups));
        }
        return run_train_mode(spec, groups, env);
    }
  } catch (const comm::CommError&) {
    // Gloo gave up before the watchdog (or outside its reach): say where this rank was.
    // Not when the launcher stopped us: peers going away is then the expected outcome.
    if (!launch::stop_requested()) {
      spdlog::error("progress of this rank at the failure: {}",
                    groups.progress->snapshot().describe());
    }
    throw;
  }
  return kExitInternal;
}

}  // namespace

int run_worker() {
  launch::WorkerEnv env;
  try {
    env = launch::read_worker_env();
  } catch (const InputError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return kExitBadInput;
  }
  log::init(env.rank, env.world_size);
  launch::ignore_sigpipe();
  // The self-test (between rounds) and the training engine (between steps) poll
  // stop_requested() and stop at a safe point; the benchmark keeps SIGTERM's default
  // action, ending at once instead of after the launcher's grace period.
  if (env.mode != launch::WorkerMode::bench_comm) launch::install_worker_signal_handlers();
  spdlog::info("worker started: pid {}, node {}, local rank {}, mode {}, attempt {}", ::getpid(),
               env.node_rank, env.local_rank, launch::to_string(env.mode), env.restart);
  try {
    int code = run_mode(env);
    if (code == kExitOk) spdlog::info("worker finished");
    return code;
  } catch (const RendezvousError& e) {
    spdlog::error("worker failed to connect: {}", e.what());
    return kExitRendezvous;
  } catch (const InputError& e) {
    // Bad input found only in the worker (e.g. --resume names a damaged checkpoint): the
    // launcher must not restart into the same error.
    spdlog::error("worker failed: {}", e.what());
    return kExitBadInput;
  } catch (const std::exception& e) {
    if (launch::stop_requested()) {
      // Peers that were stopped first make our collectives fail: a consequence of the
      // stop, not a failure of its own.
      spdlog::warn("stopped (signal {}) during: {}", launch::stop_signal(), e.what());
      return kExitPreempted;
    }
    spdlog::error("worker failed: {}", e.what());
    return kExitInternal;
  }
}

}  // namespace trainctl::app
