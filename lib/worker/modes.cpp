#include "worker/modes.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <string>
#include <vector>

#include "comm/bench_comm.h"
#include "comm/rank_coords.h"
#include "comm/self_test.h"
#include "launch/console.h"
#include "launch/prefixed_store.h"
#include "launch/tcp_store_client.h"
#include "launch/worker_signals.h"
#include "train/elastic_training.h"
#include "train/evaluate_checkpoint.h"
#include "train/spec_options.h"
#include "train/trainer.h"
#include "util/exit_codes.h"
#include "worker/connect.h"
#include "worker/ps_server_mode.h"

namespace trainctl::worker {
namespace {

// `selftest --quick`: only messages up to this many floats (wiring, not bandwidth paths).
constexpr size_t kQuickSelfTestMaxCount = 4096;

// The servers' "host:port", as each published it in the store (worker/ps_server_mode.h);
// waits for them up to runtime.comm_timeout_s.
std::vector<std::string> ps_server_addresses(const config::JobSpec& spec,
                                             const launch::WorkerEnv& env) {
  launch::TcpStoreClient store(env.store_addr, env.store_port, env.token,
                               train::store_options(spec));
  std::vector<std::string> addresses;
  for (int s = 0; s < spec.parallel.ps_servers; ++s) {
    addresses.push_back(store.get_string(ps_server_key(env.restart, s), train::comm_timeout(spec)));
  }
  return addresses;
}

}  // namespace

int run_train_mode(const config::JobSpec& spec, comm::ProcessGroups& groups,
                   const launch::WorkerEnv& env) {
  if (spec.runtime.comm_selftest) {
    comm::run_collective_self_test(groups);
    spdlog::info("collective self-test passed: verified {}", describe_groups(groups));
  }
  // The engine polls for a stop once per step (run_worker installed the handlers), so
  // SIGTERM/SIGINT/SIGUSR1 end the run at a step boundary, metrics flushed, model exported.
  train::TrainContext ctx;
  ctx.run_dir = env.run_dir;
  ctx.console_fd = env.console_fd;
  ctx.local_rank = env.local_rank;
  ctx.should_stop = [] { return launch::stop_requested(); };
  // A restart after a failure always continues from the newest checkpoint of the run.
  ctx.resume = env.restart > 0 || env.resume.empty() ? "auto" : env.resume;
  ctx.crash_in_checkpoint_step = env.hooks.crash_in_checkpoint_step;
  ctx.batch_log = env.hooks.batch_log;
  if (env.hooks.slowdown_rank == env.rank) ctx.slowdown = env.hooks.slowdown_factor;
  if (spec.parallel.mode == "parameter_server") {
    ctx.ps_server_addresses = [&spec, &env] { return ps_server_addresses(spec, env); };
    ctx.job_token = env.token;
  }
  if (spec.runtime.fault_tolerance.enabled) {
    auto elastic = std::make_shared<train::ElasticContext>();
    elastic->replica = comm::coord_of(spec.parallel, env.rank).dp;
    elastic->generation = env.ft_generation;
    elastic->attempt = env.restart;
    elastic->store = std::make_shared<launch::TcpStoreClient>(
        env.store_addr, env.store_port, env.token, train::store_options(spec));
    elastic->store_prefix = launch::attempt_prefix(env.restart);
    elastic->store_addr = env.store_addr;
    elastic->store_port = env.store_port;
    elastic->token = env.token;
    elastic->node_addr = env.node_addr;
    elastic->gloo = train::gloo_options(spec);
    ctx.elastic = std::move(elastic);
  }
  const train::TrainResult result = train::run_training(spec, groups, ctx);
  return result.stopped ? kExitPreempted : kExitOk;
}

int run_eval_mode(const config::JobSpec& spec, comm::ProcessGroups& groups,
                  const launch::WorkerEnv& env) {
  const train::EvalResult r = train::evaluate_checkpoint(spec, groups, env.local_rank, env.resume);
  if (groups.rank == 0) launch::write_console(env.console_fd, train::format_eval(r));
  return kExitOk;
}

int run_selftest_mode(comm::ProcessGroups& groups, const launch::WorkerEnv& env) {
  const long long repeat = env.selftest_repeat;
  comm::SelfTestOptions options;
  if (env.selftest_quick) {
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
  launch::write_console(
      env.console_fd,
      "selftest passed: " + std::to_string(env.world_size) + " ranks (dp " +
          std::to_string(groups.layout.dp) + " x tp " + std::to_string(groups.layout.tp) +
          " x pp " + std::to_string(groups.layout.pp) +
          (groups.layout.cp > 1 ? " x cp " + std::to_string(groups.layout.cp) : std::string()) +
          "), " + std::to_string(repeat) + " round(s), every group's collectives verified\n");
  return kExitOk;
}

int run_bench_mode(comm::ProcessGroups& groups, const launch::WorkerEnv& env) {
  comm::BenchOptions options;
  if (env.bench_min_bytes) options.min_bytes = static_cast<size_t>(*env.bench_min_bytes);
  if (env.bench_max_bytes) options.max_bytes = static_cast<size_t>(*env.bench_max_bytes);
  if (env.bench_iters) options.iters = static_cast<int>(*env.bench_iters);
  std::vector<comm::BenchRow> rows = comm::bench_collectives(*groups.world, options);
  std::string table = comm::format_bench_table(rows);
  spdlog::info("collective benchmark over {} ranks:\n{}", groups.world->size(), table);
  launch::write_console(env.console_fd,
                        "# trainctl bench comm: " + std::to_string(groups.world->size()) +
                            " ranks, Gloo over TCP, shared memory where algo says shm\n" + table);
  return kExitOk;
}

}  // namespace trainctl::worker
