#pragma once
// Internal to ps/: what a parameter server (ps/ps_server.h) holds while it serves, shared by
// the files that implement it, one responsibility each:
//   ps_server.cpp          construction, serve() and the public accessors;
//   ps_server_accept.cpp   accepting the workers (with ps/ps_handshake.h);
//   ps_server_messages.cpp one thread per worker: its messages (seed, pull, push, state);
//   ps_server_update.cpp   the update rule: when the pending gradients are applied, how.
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "model/parameters.h"
#include "ops/backend.h"
#include "ps/ps_handshake.h"
#include "ps/ps_server.h"
#include "ps/ps_wire.h"
#include "ps/shard_plan.h"
#include "ps/staleness_rule.h"
#include "ps/update_grouping.h"

namespace trainctl::ps {

namespace detail {

// Thrown inside a worker's thread when serve() is stopping: the thread just ends.
struct Stopping {};

std::string seconds(std::chrono::milliseconds d);

// A push's answer, built by the thread that applied the update while it held the lock, so
// its parameters are exactly those of `version`.
struct Reply {
  int64_t global_step = 0;
  int64_t version = 0;
  int64_t flags = 0;
  double loss_sum = 0.0;
  int64_t loss_count = 0;
  std::vector<int64_t> ints;  // gradients, then the staleness histogram
  std::vector<float> params;
};

struct WorkerSlot {
  std::unique_ptr<wire::Connection> conn;
  std::thread thread;
  std::vector<float> grad;  // its gradient while pending; only its own thread writes it
  double grad_loss_sum = 0.0;
  int64_t grad_loss_count = 0;
  int64_t sent_version = 0;  // the version of the parameters it was last sent
  std::optional<Reply> reply;
  // Every gradient applied since this worker's previous reply (its metrics).
  double loss_sum = 0.0;
  int64_t loss_count = 0;
  int64_t gradients = 0;
  std::vector<int64_t> histogram;
  bool checkpoint_due = false;
  bool goodbye = false;
  bool exited = false;

  // What a reply or the state carries of the gradients applied since this worker's last
  // answer (loss sums; ints: the gradients, then the staleness histogram), counting afresh
  // from here.
  struct Applied {
    double loss_sum = 0.0;
    int64_t loss_count = 0;
    std::vector<int64_t> ints;
  };
  Applied take_applied();
};

}  // namespace detail

struct PsServer::State {
  using Clock = wire::Clock;
  using WorkerSlot = detail::WorkerSlot;

  explicit State(ServerConfig c);
  ~State();

  // ps_server_messages.cpp
  void run_worker(int w);
  void handle_seed(int w, const wire::Message& m);
  void handle_pull(int w);
  void handle_push(int w, const wire::Message& m);
  void handle_state(int w);
  void handle_pause(int w, wire::MsgType type);
  // Under the lock: waits until seeded (or stopping: throws Stopping).
  void wait_seeded(std::unique_lock<std::mutex>& lock);
  // Under the lock, after a push: the budget and checkpoint accounting of one more gradient.
  void count_received();

  // ps_server_update.cpp. Under the lock: applies the pending set when the rule allows it
  // and no computing worker is expected soon; otherwise returns the time to look again
  // (nullopt: when something changes).
  std::optional<Clock::time_point> maybe_apply();
  void apply_locked();
  void answer_applied(const StalenessRule::Applied& a);

  // ps_server_accept.cpp: until every worker is connected (or stopping). Throws
  // ServerError when the deadline passes first.
  void accept_all(Clock::time_point deadline);
  // Answers worker j.worker's hello and starts its thread; false when that worker is
  // connected already (the connection is dropped).
  bool admit(Joined& j);

  // ps_server.cpp. The first failure wins; it stops every thread.
  void fail(const std::string& why);
  void stop_and_join();
  void wait_for_workers();

  double now_s() const { return std::chrono::duration<double>(Clock::now() - epoch).count(); }
  wire::Deadline io_deadline() const { return wire::deadline_in(config.connect_timeout); }
  int64_t floats() const { return shard.floats(); }
  std::string name() const { return "parameter server " + std::to_string(config.index); }

  ServerConfig config;
  ServerShard shard;
  // Declared in this order so the optimizer goes before the set, and the set before the
  // backend whose memory it holds.
  std::unique_ptr<ops::Backend> backend;
  std::unique_ptr<model::ParameterSet> set;
  std::unique_ptr<optim::Optimizer> optimizer;
  int listen_fd = -1;
  int port = 0;
  int64_t log_every = 1;
  bool served = false;

  mutable std::mutex mu;
  std::condition_variable cv;
  StalenessRule rule;
  UpdateGrouping grouping;
  Clock::time_point epoch = Clock::now();  // the origin of grouping's times
  double pending_since = -1.0;             // arrival of the pending set's first gradient
  std::vector<WorkerSlot> slots;
  bool seeded = false;
  bool stopping = false;
  std::string failure;
  int64_t received = 0;   // gradients received (counting the seed's global step)
  int64_t applied = 0;    // gradients applied (likewise)
  int64_t seeded_at = 0;  // the seed's global step
  int64_t updates = 0;    // updates made by this serve()
  int64_t max_staleness = 0;
  int64_t window_staleness = 0;  // largest staleness since the last progress line
  bool stop = false;

 private:
  void build_shard();
};

}  // namespace trainctl::ps
