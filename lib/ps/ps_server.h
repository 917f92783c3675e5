#pragma once
// One parameter server (`parallel.mode: parameter_server`): holds a shard of the
// parameters (ps/shard_plan.h) and their AdamW state, applies the workers' gradients by
// the bounded-staleness rule (ps/staleness_rule.h) and answers each push with the fresh
// parameters of its shard. Its own process (`trainctl worker` with
// TRAINCTL_PS_SERVER=s, started and supervised by the launcher like a worker).
//
// Life of a server:
//   PsServer server(config);            // listens on config.bind_addr, port() ephemeral
//   publish(server.port());             // the caller puts host:port in the store
//   server.serve();                     // until every worker has said goodbye
// serve() accepts one connection per worker (each must prove it holds the job token;
// strangers, idle connections and a second claim on a connected worker's index are logged
// and dropped while the server keeps accepting), waits for worker 0's seed (the parameters
// and optimizer state to start from: fresh, or a checkpoint's), answers pulls, pushes
// and state requests, and returns when every worker has said goodbye. A worker whose
// connection ends without goodbye (it died) makes serve() throw ServerError naming the
// worker; the launcher then stops the job and restarts it from the last checkpoint.
//
// Server 0 also steers the run (the other servers answer these fields with zeros):
//   - done: once the gradients received reach training.steps x workers (the same token
//     budget as synchronous data parallelism, however it is split between fast and slow
//     workers), every reply says done;
//   - checkpoint: each time the gradients received reach a multiple of
//     checkpoint.every_steps x workers, each worker's next reply says checkpoint (once per
//     worker), and the workers save together;
//   - stop: a push carrying a stop request (a signal reached that worker) makes every
//     later reply say stop;
//   - metrics: each reply to a worker carries the loss sums of the gradients applied
//     since that worker's previous reply and a histogram of their staleness.
#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/shard.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"

namespace trainctl::ps {

class ServerError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ServerConfig {
  int index = 0;  // this server, 0 <= index < servers
  int servers = 1;
  int workers = 1;
  int max_staleness = 0;                 // K
  std::vector<model::ParamSpec> params;  // the WHOLE model's parameters, in flat order
  optim::OptimizerOptions optimizer;
  // The learning rate of an update is schedule.at(g) x n / workers: g = gradients applied
  // before it / workers (the global step, as synchronous DP counts it) and n the gradients
  // the update averages. The schedule's rate belongs to a whole global batch; an update
  // that carries n of its `workers` parts moves the parameters that share of it, so the
  // parameters move as far per token as in synchronous DP however the gradients group
  // (without it, K >= 1 with equal workers makes `workers` full-rate AdamW steps per
  // global step: measured +0.41 nats after 400 steps, dp 2, K = 2).
  optim::LrSchedule schedule;
  // How long a ready pending set may wait for workers about as fast as the fastest, in
  // multiples of the fastest worker's step (ps/update_grouping.h); 0: never.
  double group_window = 1.0;
  int64_t total_steps = 1;       // training.steps
  int64_t checkpoint_every = 0;  // checkpoint.every_steps (0: no periodic checkpoints)
  // The address the workers connect to (the launcher gives the node's own, loopback on
  // one node): the server listens there only, not on every interface.
  std::string bind_addr = "127.0.0.1";
  // The job token (launch/job_token.h): a connection is served only once it proved it
  // holds the same (ps/ps_auth.h); the token itself never travels. The in-process tests
  // leave it empty on both sides.
  std::string token;
  // How long a new connection may take to prove itself; others are accepted meanwhile.
  std::chrono::milliseconds handshake_timeout{std::chrono::seconds(10)};
  // CPU threads for the server's updates (its backend's pool; the AdamW pass is parallel).
  int threads = 1;
  // How long to wait for the workers to connect and for worker 0's seed.
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(300)};
};

class PsServer {
 public:
  // Builds the shard's ParameterSet and optimizer, binds and listens. Throws ServerError
  // when it cannot listen.
  explicit PsServer(ServerConfig config);
  ~PsServer();
  PsServer(const PsServer&) = delete;
  PsServer& operator=(const PsServer&) = delete;

  int port() const;
  // Serves until every worker said goodbye (see above). Throws ServerError.
  void serve();

  // After serve(): updates applied, and the largest staleness of any applied gradient.
  int64_t updates() const;
  int64_t max_staleness_seen() const;
  // Gradients received so far, counting from the seed's global_step x workers (safe to
  // call from another thread while serve() runs: progress, and tests that need a known
  // arrival order).
  int64_t gradients_received() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace trainctl::ps
