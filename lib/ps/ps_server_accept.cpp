// A parameter server accepting its workers: every connection must prove it holds the job
// token (ps/ps_handshake.h); strangers, idle connections and a second claim on a worker's
// slot are logged and dropped while the server keeps accepting (issue 36).
#include <spdlog/spdlog.h>

#include "ps/ps_server_state.h"

namespace trainctl::ps {

bool PsServer::State::admit(Joined& j) {
  WorkerSlot& slot = slots[static_cast<size_t>(j.worker)];
  if (slot.conn) {
    // Only a holder of the token gets here: a worker of this job connecting twice (a
    // bug), never a reason to disturb the one already connected.
    spdlog::warn(
        "{}: a second connection proved it is worker {}, which is already connected: "
        "dropped it",
        name(), j.worker);
    return false;
  }
  const int64_t ack[4] = {config.index, shard.begin, shard.end, 0};
  try {
    j.conn->send(wire::MsgType::hello, ack, 0.0, {}, j.ack_proof, {},
                 wire::deadline_in(std::chrono::seconds(10)));
  } catch (const wire::WireError& e) {
    // It proved itself and went away: a real worker failing, whose launcher reports it.
    spdlog::warn("{}: {}", name(), e.what());
    return false;
  }
  {
    std::lock_guard lock(mu);
    slot.conn = std::move(j.conn);
  }
  const int w = j.worker;
  slot.thread = std::thread([this, w] { run_worker(w); });
  return true;
}

void PsServer::State::accept_all(Clock::time_point deadline) {
  HandshakeOptions options;
  options.token = config.token;
  options.server = config.index;
  options.workers = config.workers;
  options.name = name();
  options.timeout = config.handshake_timeout;
  Handshakes handshakes(listen_fd, options);
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
      std::string refused;
      if (handshakes.refused() > 0) {
        refused = "; refused " + std::to_string(handshakes.refused()) +
                  " connection(s), the last one from " + handshakes.last_refusal() +
                  " (do all processes of the job hold the same job token?)";
      }
      throw ServerError(name() + ": only " + std::to_string(connected) + " of " +
                        std::to_string(config.workers) + " workers connected within " +
                        detail::seconds(config.connect_timeout) + " (missing: " + missing + ")" +
                        refused);
    }
    // Short waits, so a worker that fails meanwhile stops the server promptly.
    for (Joined& j :
         handshakes.step(std::min(deadline, wire::deadline_in(std::chrono::milliseconds(100))))) {
      if (admit(j)) ++connected;
    }
  }
}

}  // namespace trainctl::ps
