#include "worker/ps_server_mode.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <exception>
#include <string>

#include "config/load.h"
#include "launch/prefixed_store.h"
#include "launch/tcp_store_client.h"
#include "launch/worker_signals.h"
#include "model/shard.h"
#include "ps/ps_server.h"
#include "train/spec_options.h"
#include "util/exit_codes.h"
#include "util/log.h"

namespace trainctl::worker {

std::string ps_server_key(int restart, int index) {
  return launch::attempt_prefix(restart) + "ps/server/" + std::to_string(index);
}

namespace {

ps::ServerConfig server_config(const config::JobSpec& spec, const launch::WorkerEnv& env) {
  ps::ServerConfig c;
  c.index = env.ps_server;
  // Only the job's workers, which prove they hold its token, on the address they use
  // (this node's as the other nodes reach it; loopback on one node).
  c.token = env.token;
  c.bind_addr = env.node_addr;
  c.servers = spec.parallel.ps_servers;
  c.workers = spec.parallel.dp;
  c.max_staleness = spec.parallel.ps_max_staleness;
  const model::ModelConfig model = train::gpt_config(spec);
  c.params = model::gpt_param_specs(model, model::GptShardSpec::whole(model));
  c.optimizer = train::optimizer_options(spec);
  c.schedule = train::lr_schedule(spec);
  c.total_steps = spec.training.steps;
  c.checkpoint_every = spec.checkpoint.every_steps;
  c.connect_timeout = train::comm_timeout(spec);
  return c;
}

}  // namespace

int run_ps_server(const launch::WorkerEnv& env) {
  log::init_labelled("ps server " + std::to_string(env.ps_server));
  launch::ignore_sigpipe();
  // A stop signal is for the workers: they save a checkpoint, which needs the servers'
  // state, and then say goodbye; the server ends after them.
  launch::install_worker_signal_handlers();
  spdlog::info("parameter server {} started: pid {}, node {}, attempt {}", env.ps_server,
               ::getpid(), env.node_rank, env.restart);
  try {
    const config::JobSpec spec = config::load_job_spec(env.config, {});
    ps::PsServer server(server_config(spec, env));
    launch::TcpStoreClient store(env.store_addr, env.store_port, env.token,
                                 train::store_options(spec));
    const std::string address = env.node_addr + ":" + std::to_string(server.port());
    store.set_string(ps_server_key(env.restart, env.ps_server), address);
    spdlog::info("listening on {} for {} worker(s)", address, spec.parallel.dp);
    server.serve();
    spdlog::info("parameter server {} finished: {} updates, largest staleness {}", env.ps_server,
                 server.updates(), server.max_staleness_seen());
    return kExitOk;
  } catch (const std::exception& e) {
    if (launch::stop_requested()) {
      spdlog::warn("stopped (signal {}) during: {}", launch::stop_signal(), e.what());
      return kExitPreempted;
    }
    spdlog::error("parameter server failed: {}", e.what());
    return kExitInternal;
  }
}

}  // namespace trainctl::worker
