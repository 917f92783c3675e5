#include "ps/ps_server.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>

#include "ps/ps_server_state.h"

namespace trainctl::ps {

namespace detail {

std::string seconds(std::chrono::milliseconds d) {
  return std::to_string(static_cast<double>(d.count()) / 1000.0) + " s";
}

WorkerSlot::Applied WorkerSlot::take_applied() {
  Applied a{loss_sum, loss_count, {gradients}};
  a.ints.insert(a.ints.end(), histogram.begin(), histogram.end());
  loss_sum = 0.0;
  loss_count = 0;
  gradients = 0;
  std::fill(histogram.begin(), histogram.end(), 0);
  return a;
}

}  // namespace detail

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
  build_shard();
  slots = std::vector<WorkerSlot>(static_cast<size_t>(config.workers));
  for (WorkerSlot& slot : slots) {
    slot.grad.assign(static_cast<size_t>(floats()), 0.0f);
    slot.histogram.assign(static_cast<size_t>(config.max_staleness) + 1, 0);
  }
  log_every = std::max<int64_t>(10, config.total_steps / 10);
  try {
    // Room for the workers and for strangers' connections while they are refused.
    listen_fd = wire::listen_on(config.bind_addr, std::max(config.workers + 16, 128), &port);
  } catch (const wire::WireError& e) {
    throw ServerError(name() + ": " + e.what());
  }
}

// The shard's ParameterSet and optimizer.
void PsServer::State::build_shard() {
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

// After every worker connected: worker 0's seed within the connect timeout, then until
// every worker's thread ended (goodbye) or something failed.
void PsServer::State::wait_for_workers() {
  std::unique_lock lock(mu);
  if (!cv.wait_until(lock, Clock::now() + config.connect_timeout,
                     [&] { return seeded || stopping; })) {
    lock.unlock();
    fail(name() + ": worker 0 sent no seed within " + detail::seconds(config.connect_timeout));
    return;
  }
  cv.wait(lock, [&] {
    return stopping ||
           std::all_of(slots.begin(), slots.end(), [](const WorkerSlot& w) { return w.exited; });
  });
}

PsServer::PsServer(ServerConfig config) : s_(std::make_unique<State>(std::move(config))) {}

PsServer::~PsServer() = default;

int PsServer::port() const { return s_->port; }

void PsServer::serve() {
  State& s = *s_;
  if (s.served) throw ServerError(s.name() + ": serve() called twice");
  s.served = true;
  try {
    s.accept_all(State::Clock::now() + s.config.connect_timeout);
    s.wait_for_workers();
  } catch (const std::exception& e) {
    s.fail(e.what());
  }
  s.stop_and_join();
  if (!s.failure.empty()) throw ServerError(s.failure);
  int64_t in = 0, out = 0;
  for (const State::WorkerSlot& w : s.slots) {
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
