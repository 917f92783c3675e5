#include "ps/ps_server.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

#include "model/parameters.h"
#include "ops/backend.h"
#include "ps/ps_wire.h"
#include "ps/shard_plan.h"
#include "ps/staleness_rule.h"
#include "ps/update_grouping.h"

namespace trainctl::ps {

namespace {

using wire::Clock;
using wire::join_names;
using wire::MsgType;
using wire::split_names;

// Thrown inside a worker's thread when serve() is stopping: the thread just ends.
struct Stopping {};

std::string seconds(std::chrono::milliseconds d) {
  return std::to_string(static_cast<double>(d.count()) / 1000.0) + " s";
}

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
  Applied take_applied() {
    Applied a{loss_sum, loss_count, {gradients}};
    a.ints.insert(a.ints.end(), histogram.begin(), histogram.end());
    loss_sum = 0.0;
    loss_count = 0;
    gradients = 0;
    std::fill(histogram.begin(), histogram.end(), 0);
    return a;
  }
};

}  // namespace

struct PsServer::State {
  explicit State(ServerConfig c);
  ~State();

  void run_worker(int w);
  void handle_seed(int w, const wire::Message& m);
  void handle_pull(int w);
  void handle_push(int w, const wire::Message& m);
  void handle_state(int w);
  // Under the lock: waits until seeded (or stopping: throws Stopping).
  void wait_seeded(std::unique_lock<std::mutex>& lock);
  // Under the lock: applies the pending set when the rule allows it and no computing
  // worker is expected soon; otherwise returns the time to look again (nullopt: when
  // something changes).
  std::optional<Clock::time_point> maybe_apply();
  double now_s() const { return std::chrono::duration<double>(Clock::now() - epoch).count(); }
  void apply_locked();
  // The first failure wins; it stops every thread.
  void fail(const std::string& why);
  void accept_all(Clock::time_point deadline);
  void stop_and_join();
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
};

PsServer::State::State(ServerConfig c)
    : config(std::move(c)),
      rule(std::max(config.workers, 1), std::max(config.max_staleness, 0)),
      grouping(std::max(config.workers, 1), std::max(config.group_window, 0.0)) {
  if (config.servers < 1 || config.index < 0 || config.index >= config.servers) {
    throw ServerError("parameter server " + std::to_string(config.index) + " of " +
                      std::to_string(config.servers) + ": no such server");
  }
  if (config.workers < 1) throw ServerError(name() + ": needs at least one worker");
  if (config.max_staleness < 0) throw ServerError(name() + ": max_staleness < 0");
  std::vector<ServerShard> plan;
  try {
    plan = plan_shards(config.params, config.servers);
  } catch (const std::invalid_argument& e) {
    throw ServerError(name() + ": " + e.what());
  }
  shard = plan[static_cast<size_t>(config.index)];

  backend = ops::make_cpu_backend({.threads = std::max(config.threads, 1)});
  set = std::make_unique<model::ParameterSet>(*backend);
  for (size_t i = shard.first_param; i < shard.last_param; ++i) set->declare(config.params[i]);
  set->allocate();
  // The workers send ranges of their whole flat layout; the shard's own set must lay its
  // parameters out exactly like that range (it does while parameters start 64-byte
  // aligned: model/parameters.h), or the ranges would land on the wrong parameters.
  const std::vector<int64_t> whole = model::flat_offsets(config.params);
  for (size_t i = 0; i < set->list().size(); ++i) {
    if (set->at(i).offset != whole[shard.first_param + i] - shard.begin) {
      throw ServerError(name() + ": parameter " + set->at(i).name +
                        " is laid out differently in the shard than in the whole model");
    }
  }
  try {
    optimizer = optim::make_optimizer(config.optimizer, *set, *backend);
  } catch (const std::invalid_argument& e) {
    throw ServerError(name() + ": " + e.what());
  }

  slots = std::vector<WorkerSlot>(static_cast<size_t>(config.workers));
  for (WorkerSlot& slot : slots) {
    slot.grad.assign(static_cast<size_t>(floats()), 0.0f);
    slot.histogram.assign(static_cast<size_t>(config.max_staleness) + 1, 0);
  }
  log_every = std::max<int64_t>(10, config.total_steps / 10);
  try {
    listen_fd = wire::listen_on(config.bind_addr, config.workers + 16, &port);
  } catch (const wire::WireError& e) {
    throw ServerError(name() + ": " + e.what());
  }
}

PsServer::State::~State() {
  stop_and_join();
  if (listen_fd >= 0) ::close(listen_fd);
}

void PsServer::State::fail(const std::string& why) {
  {
    std::lock_guard lock(mu);
    if (stopping) return;  // stopping already: what follows is the consequence, not a cause
    failure = why;
    stopping = true;
  }
  cv.notify_all();
}

void PsServer::State::stop_and_join() {
  {
    std::lock_guard lock(mu);
    stopping = true;
    // Wakes threads blocked in a read or write; the sockets are closed after the joins,
    // so no thread ever sees a descriptor number reused.
    for (WorkerSlot& slot : slots) {
      if (slot.conn) slot.conn->shutdown();
    }
  }
  cv.notify_all();
  for (WorkerSlot& slot : slots) {
    if (slot.thread.joinable()) slot.thread.join();
  }
}

void PsServer::State::wait_seeded(std::unique_lock<std::mutex>& lock) {
  cv.wait(lock, [&] { return seeded || stopping; });
  if (stopping) throw Stopping{};
}

void PsServer::State::run_worker(int w) {
  WorkerSlot& slot = slots[static_cast<size_t>(w)];
  try {
    for (;;) {
      // A worker may compute for as long as it likes between messages.
      const wire::Message m = slot.conn->receive(wire::no_deadline(), io_deadline());
      switch (m.type) {
        case MsgType::seed:
          handle_seed(w, m);
          break;
        case MsgType::pull:
          handle_pull(w);
          break;
        case MsgType::push:
          handle_push(w, m);
          break;
        case MsgType::state_request:
          handle_state(w);
          break;
        case MsgType::goodbye:
        case MsgType::pause: {
          // No more gradients from this worker (goodbye), or none until its next pull (a
          // checkpoint): the others are not held back for it. The connection stays open:
          // worker 0 still fetches the final state after its goodbye; the worker's end of
          // the connection closing after a goodbye is the normal end.
          {
            std::lock_guard lock(mu);
            if (m.type == MsgType::goodbye) slot.goodbye = true;
            rule.finish(w);
            grouping.paused(w);
            // Others' gradients may have waited for this worker only.
            if (seeded) maybe_apply();
          }
          cv.notify_all();
          break;
        }
        default:
          throw wire::WireError(wire::WireError::Kind::protocol,
                                std::string("unexpected ") + wire::to_string(m.type) + " message");
      }
    }
  } catch (const Stopping&) {
  } catch (const wire::WireError& e) {
    bool said_goodbye = false;
    {
      std::lock_guard lock(mu);
      said_goodbye = slot.goodbye;
    }
    if (e.kind() == wire::WireError::Kind::closed && said_goodbye) {
      // The worker left after its goodbye: the normal end of its connection.
    } else if (e.kind() == wire::WireError::Kind::closed) {
      fail("worker " + std::to_string(w) +
           " closed its connection without saying goodbye (it died?)");
    } else {
      fail(name() + ", worker " + std::to_string(w) + ": " + e.what());
    }
  } catch (const std::exception& e) {
    fail(name() + ", worker " + std::to_string(w) + ": " + e.what());
  }
  {
    std::lock_guard lock(mu);
    slot.exited = true;
  }
  cv.notify_all();
}

void PsServer::State::handle_seed(int w, const wire::Message& m) {
  if (w != 0) throw ServerError("only worker 0 seeds the parameter servers");
  {
    std::lock_guard lock(mu);
    if (seeded) throw ServerError("worker 0 seeded twice");
  }
  const std::vector<std::string> names = split_names(m.text);
  if (names != optimizer->state_names()) {
    throw ServerError("the seed's optimizer state has buffers [" + m.text + "], this server's " +
                      config.optimizer.type + " optimizer [" +
                      join_names(optimizer->state_names()) + "]");
  }
  const int64_t n = floats();
  if (m.floats != n * static_cast<int64_t>(1 + names.size())) {
    throw ServerError("the seed holds " + std::to_string(m.floats) + " floats, this shard " +
                      std::to_string(n) + " per buffer (do the parameter lists differ?)");
  }
  // Nobody touches the set before it is seeded: read straight into it.
  const wire::Deadline deadline = io_deadline();
  slots[0].conn->read_floats(set->data(), n, deadline);
  optim::OptimizerState state;
  state.step = m.i[1];
  state.names = names;
  for (size_t b = 0; b < names.size(); ++b) {
    state.buffers.emplace_back(static_cast<size_t>(set->total()), 0.0f);
    slots[0].conn->read_floats(state.buffers.back().data(), n, deadline);
  }
  optimizer->load_state(state);
  const int64_t global_step = m.i[0];
  {
    std::lock_guard lock(mu);
    rule.reset(global_step);
    for (WorkerSlot& slot : slots) {
      slot.sent_version = global_step;
      // A worker that said goodbye before the seed stays finished.
      if (slot.goodbye) rule.finish(static_cast<int>(&slot - slots.data()));
    }
    received = applied = global_step * config.workers;
    seeded_at = global_step;
    seeded = true;
  }
  cv.notify_all();
  spdlog::info("{}: seeded at global step {} (floats [{}, {}) of the flat layout, {} parameters)",
               name(), global_step, shard.begin, shard.end, set->list().size());
}

void PsServer::State::handle_pull(int w) {
  WorkerSlot& slot = slots[static_cast<size_t>(w)];
  std::vector<float> params;
  int64_t i[4] = {0, 0, 0, 0};
  {
    std::unique_lock lock(mu);
    wait_seeded(lock);
    params.assign(set->data(), set->data() + floats());
    i[0] = applied / config.workers;
    i[1] = rule.version();
    slot.sent_version = rule.version();
    grouping.sent(w, now_s());
    // After a pause (a checkpoint) the worker computes again, on this version.
    if (rule.finished(w) && !slot.goodbye) rule.rejoin(w, rule.version());
  }
  const std::span<const float> part(params);
  slot.conn->send(MsgType::params, i, 0.0, {}, std::string(), std::span(&part, 1), io_deadline());
}

void PsServer::State::handle_push(int w, const wire::Message& m) {
  WorkerSlot& slot = slots[static_cast<size_t>(w)];
  if (m.floats != floats()) {
    throw ServerError("pushed " + std::to_string(m.floats) + " floats, this shard holds " +
                      std::to_string(floats()) + " (do the parameter lists differ?)");
  }
  // Its buffer is not pending (the worker waits for each reply), so no lock is needed.
  slot.conn->read_floats(slot.grad.data(), m.floats, io_deadline());
  Reply reply;
  {
    std::unique_lock lock(mu);
    wait_seeded(lock);
    if (m.i[3] != slot.sent_version) {
      throw ServerError("pushed a gradient computed on version " + std::to_string(m.i[3]) +
                        ", but was last sent version " + std::to_string(slot.sent_version));
    }
    slot.grad_loss_sum = m.x;
    slot.grad_loss_count = m.i[1];
    if (m.i[2] != 0) stop = true;
    ++received;
    const int64_t budget = config.total_steps * config.workers;
    const int64_t every = config.checkpoint_every * config.workers;
    if (every > 0 && received % every == 0 && received < budget) {
      for (WorkerSlot& s : slots) s.checkpoint_due = true;
    }
    rule.arrive(w, slot.sent_version);
    const double now = now_s();
    grouping.arrived(w, now);
    if (pending_since < 0.0) pending_since = now;
    // Wait for the update that takes this gradient; when the pending set is held for a
    // worker expected soon, this thread applies it at the deadline unless that worker's
    // arrival (or anything else) has applied it first.
    for (;;) {
      const std::optional<Clock::time_point> look_again = maybe_apply();
      const auto answered = [&] { return slot.reply.has_value() || stopping; };
      if (answered()) break;
      if (look_again) {
        cv.wait_until(lock, *look_again, answered);
      } else {
        cv.wait(lock, answered);
      }
    }
    if (!slot.reply) throw Stopping{};
    reply = std::move(*slot.reply);
    slot.reply.reset();
  }
  const int64_t i[4] = {reply.global_step, reply.version, reply.flags, reply.loss_count};
  const std::span<const float> part(reply.params);
  slot.conn->send(MsgType::reply, i, reply.loss_sum, reply.ints, std::string(), std::span(&part, 1),
                  io_deadline());
}

void PsServer::State::handle_state(int w) {
  WorkerSlot& slot = slots[static_cast<size_t>(w)];
  optim::OptimizerState state;
  std::vector<float> params;
  // The gradients applied since this worker's last reply go with the state, like a
  // reply's: the state is fetched when no gradient is in flight (a checkpoint, the end),
  // so worker 0's metrics then count every gradient applied, the slow workers' last ones
  // included.
  WorkerSlot::Applied since;
  {
    std::unique_lock lock(mu);
    wait_seeded(lock);
    state = optimizer->save_state();
    params.assign(set->data(), set->data() + floats());
    since = slot.take_applied();
  }
  std::vector<std::span<const float>> parts{std::span<const float>(params)};
  for (const auto& b : state.buffers) parts.emplace_back(b.data(), static_cast<size_t>(floats()));
  const int64_t i[4] = {state.step, since.loss_count, 0, 0};
  slot.conn->send(MsgType::state, i, since.loss_sum, since.ints, join_names(state.names), parts,
                  io_deadline());
}

std::optional<Clock::time_point> PsServer::State::maybe_apply() {
  while (rule.ready()) {
    const std::optional<double> hold =
        grouping.hold_until(rule.computing(), pending_since, now_s());
    if (hold) {
      return epoch +
             std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(*hold));
    }
    apply_locked();
  }
  return std::nullopt;
}

void PsServer::State::apply_locked() {
  const StalenessRule::Applied a = rule.apply();
  pending_since = -1.0;
  const auto n = static_cast<size_t>(floats());
  // The mean of the pending gradients (each already a worker's mean), summed in worker
  // order so the result does not depend on the order they arrived in.
  set->zero_grads();
  float* g = set->grads();
  for (int w : a.workers) {
    const float* src = slots[static_cast<size_t>(w)].grad.data();
    for (size_t k = 0; k < n; ++k) g[k] += src[k];
  }
  if (a.workers.size() > 1) {
    const float inv = 1.0f / static_cast<float>(a.workers.size());
    for (size_t k = 0; k < n; ++k) g[k] *= inv;
  }
  // The update's share of the global batch scales its rate (ServerConfig::schedule).
  const double share = static_cast<double>(a.workers.size()) / config.workers;
  optimizer->step(config.schedule.at(applied / config.workers) * share);
  applied += static_cast<int64_t>(a.workers.size());
  ++updates;

  double loss_sum = 0.0;
  int64_t loss_count = 0;
  for (size_t k = 0; k < a.workers.size(); ++k) {
    const WorkerSlot& s = slots[static_cast<size_t>(a.workers[k])];
    loss_sum += s.grad_loss_sum;
    loss_count += s.grad_loss_count;
    max_staleness = std::max(max_staleness, a.staleness[k]);
    window_staleness = std::max(window_staleness, a.staleness[k]);
  }
  for (WorkerSlot& s : slots) {
    s.loss_sum += loss_sum;
    s.loss_count += loss_count;
    s.gradients += static_cast<int64_t>(a.workers.size());
    for (int64_t st : a.staleness) ++s.histogram[static_cast<size_t>(st)];
  }

  // Only server 0 steers; the others answer with zeros.
  const bool steer = config.index == 0;
  const bool done = received >= config.total_steps * config.workers;
  for (int w : a.workers) {
    WorkerSlot& s = slots[static_cast<size_t>(w)];
    Reply r;
    r.global_step = applied / config.workers;
    r.version = a.version;
    WorkerSlot::Applied since = s.take_applied();
    if (steer) {
      r.flags = (done ? wire::kFlagDone : 0) | (stop ? wire::kFlagStop : 0) |
                (s.checkpoint_due ? wire::kFlagCheckpoint : 0);
      r.loss_sum = since.loss_sum;
      r.loss_count = since.loss_count;
      r.ints = std::move(since.ints);
    }
    s.checkpoint_due = false;
    r.params.assign(set->data(), set->data() + n);
    s.sent_version = a.version;
    grouping.sent(w, now_s());
    s.reply = std::move(r);
  }
  cv.notify_all();

  if (updates % log_every == 0) {
    spdlog::info(
        "{}: version {}, global step {}, {} gradients applied, staleness max {} over "
        "the last {} updates",
        name(), a.version, applied / config.workers, applied, window_staleness, log_every);
    window_staleness = 0;
  }
}

void PsServer::State::accept_all(Clock::time_point deadline) {
  int connected = 0;
  while (connected < config.workers) {
    {
      std::lock_guard lock(mu);
      if (stopping) return;
    }
    if (Clock::now() >= deadline) {
      std::string missing;
      for (size_t w = 0; w < slots.size(); ++w) {
        if (!slots[w].conn) missing += (missing.empty() ? "" : ", ") + std::to_string(w);
      }
      throw ServerError(name() + ": only " + std::to_string(connected) + " of " +
                        std::to_string(config.workers) + " workers connected within " +
                        seconds(config.connect_timeout) + " (missing: " + missing + ")");
    }
    // Short waits, so a worker that fails meanwhile stops the server promptly.
    const int fd = wire::accept_before(
        listen_fd, std::min(deadline, Clock::now() + std::chrono::milliseconds(100)));
    if (fd < 0) continue;
    auto conn = std::make_unique<wire::Connection>(fd, "a connection to " + name());
    wire::Message hello;
    try {
      const auto hello_deadline = std::min(deadline, wire::deadline_in(std::chrono::seconds(10)));
      hello = conn->receive(hello_deadline, hello_deadline);
      if (hello.type != MsgType::hello) {
        throw wire::WireError(wire::WireError::Kind::protocol, "did not start with hello");
      }
    } catch (const wire::WireError& e) {
      // Something that is not one of our workers (a port scan, a stale process): not a
      // reason to fail the job.
      spdlog::warn("{}: dropped a connection: {}", name(), e.what());
      continue;
    }
    const int64_t w = hello.i[0];
    if (w < 0 || w >= config.workers || slots[static_cast<size_t>(w)].conn) {
      throw ServerError(name() + ": a connection says it is worker " + std::to_string(w) +
                        (w >= 0 && w < config.workers ? ", which is already connected"
                                                      : ", which does not exist") +
                        " (" + std::to_string(config.workers) + " workers)");
    }
    conn->set_peer("worker " + std::to_string(w));
    const int64_t ack[4] = {config.index, shard.begin, shard.end, 0};
    try {
      conn->send(MsgType::hello, ack, 0.0, {}, std::string(), {}, io_deadline());
    } catch (const wire::WireError& e) {
      throw ServerError(name() + ": " + e.what());
    }
    WorkerSlot& slot = slots[static_cast<size_t>(w)];
    {
      std::lock_guard lock(mu);
      slot.conn = std::move(conn);
    }
    slot.thread = std::thread([this, w] { run_worker(static_cast<int>(w)); });
    ++connected;
  }
}

PsServer::PsServer(ServerConfig config) : s_(std::make_unique<State>(std::move(config))) {}

PsServer::~PsServer() = default;

int PsServer::port() const { return s_->port; }

void PsServer::serve() {
  State& s = *s_;
  if (s.served) throw ServerError(s.name() + ": serve() called twice");
  s.served = true;
  try {
    s.accept_all(Clock::now() + s.config.connect_timeout);
    std::unique_lock lock(s.mu);
    if (!s.cv.wait_until(lock, Clock::now() + s.config.connect_timeout,
                         [&] { return s.seeded || s.stopping; })) {
      lock.unlock();
      s.fail(s.name() + ": worker 0 sent no seed within " + seconds(s.config.connect_timeout));
    } else {
      s.cv.wait(lock, [&] {
        return s.stopping || std::all_of(s.slots.begin(), s.slots.end(),
                                         [](const WorkerSlot& w) { return w.exited; });
      });
    }
  } catch (const std::exception& e) {
    s.fail(e.what());
  }
  s.stop_and_join();
  if (!s.failure.empty()) throw ServerError(s.failure);
  int64_t in = 0, out = 0;
  for (const WorkerSlot& w : s.slots) {
    in += w.conn->payload_bytes_received();
    out += w.conn->payload_bytes_sent();
  }
  spdlog::info(
      "{}: every worker said goodbye: {} updates of {} gradients from global step {} to "
      "{}, largest staleness {}, {:.1f} MB received, {:.1f} MB sent",
      s.name(), s.updates, s.applied - s.seeded_at * s.config.workers, s.seeded_at,
      s.applied / s.config.workers, s.max_staleness, static_cast<double>(in) / 1e6,
      static_cast<double>(out) / 1e6);
}

int64_t PsServer::updates() const {
  std::lock_guard lock(s_->mu);
  return s_->updates;
}

int64_t PsServer::max_staleness_seen() const {
  std::lock_guard lock(s_->mu);
  return s_->max_staleness;
}

int64_t PsServer::gradients_received() const {
  std::lock_guard lock(s_->mu);
  return s_->received;
}

}  // namespace trainctl::ps
