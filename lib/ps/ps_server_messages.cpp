// A parameter server's thread per worker: the worker's messages and their answers.
#include <spdlog/spdlog.h>

#include "ps/ps_server_state.h"

namespace trainctl::ps {

using detail::Stopping;
using wire::join_names;
using wire::MsgType;
using wire::split_names;

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
        case MsgType::pause:
          handle_pause(w, m.type);
          break;
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

// No more gradients from this worker (goodbye), or none until its next pull (a
// checkpoint): the others are not held back for it. The connection stays open: worker 0
// still fetches the final state after its goodbye; the worker's end of the connection
// closing after a goodbye is the normal end.
void PsServer::State::handle_pause(int w, MsgType type) {
  {
    std::lock_guard lock(mu);
    if (type == MsgType::goodbye) slots[static_cast<size_t>(w)].goodbye = true;
    rule.finish(w);
    grouping.paused(w);
    // Others' gradients may have waited for this worker only.
    if (seeded) maybe_apply();
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

void PsServer::State::count_received() {
  ++received;
  const int64_t budget = config.total_steps * config.workers;
  const int64_t every = config.checkpoint_every * config.workers;
  if (every > 0 && received % every == 0 && received < budget) {
    for (WorkerSlot& s : slots) s.checkpoint_due = true;
  }
}

void PsServer::State::handle_push(int w, const wire::Message& m) {
  WorkerSlot& slot = slots[static_cast<size_t>(w)];
  if (m.floats != floats()) {
    throw ServerError("pushed " + std::to_string(m.floats) + " floats, this shard holds " +
                      std::to_string(floats()) + " (do the parameter lists differ?)");
  }
  // Its buffer is not pending (the worker waits for each reply), so no lock is needed.
  slot.conn->read_floats(slot.grad.data(), m.floats, io_deadline());
  detail::Reply reply;
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
    count_received();
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

}  // namespace trainctl::ps
