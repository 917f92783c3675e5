#include "ps/ps_client.h"

#include <utility>

#include "ps/ps_auth.h"
#include "ps/ps_wire.h"

namespace trainctl::ps {

namespace {

using wire::join_names;
using wire::MsgType;
using wire::split_names;

struct Server {
  std::string address;
  ServerShard shard;
  std::unique_ptr<wire::Connection> conn;
  int64_t version = 0;  // of the parameters it last sent this worker
};

// Server 0's count of the gradients applied since this worker's last answer (a reply or
// the state): their loss sums, then in ints the gradients and the staleness histogram.
void read_applied(const wire::Message& m, int64_t loss_count, PushReply& out) {
  out.loss_count = loss_count;
  out.loss_sum = m.x;
  if (!m.ints.empty()) {
    out.gradients = m.ints[0];
    out.staleness.assign(m.ints.begin() + 1, m.ints.end());
  }
}

}  // namespace

struct PsClient::Impl {
  int worker = 0;
  ClientOptions options;
  std::vector<Server> servers;
  bool said_goodbye = false;

  std::string peer(size_t s) const {
    return "parameter server " + std::to_string(s) + " (" + servers[s].address + ")";
  }
  wire::Deadline reply_deadline() const { return wire::deadline_in(options.timeout); }

  // Runs `f`, turning the wire's errors into ClientError with what a user can do about it.
  template <typename F>
  auto guarded(F&& f) -> decltype(f()) {
    try {
      return f();
    } catch (const wire::WireError& e) {
      std::string hint;
      if (e.kind() == wire::WireError::Kind::closed) {
        hint = " (the server stopped or failed: its log says why)";
      } else if (e.kind() == wire::WireError::Kind::timeout) {
        hint = " (is the server alive? ClientOptions::timeout bounds every wait)";
      }
      throw ClientError("worker " + std::to_string(worker) + ": " + e.what() + hint);
    }
  }

  // The next message from server s, which must be of type `want`.
  wire::Message expect(size_t s, MsgType want, wire::Deadline deadline) {
    wire::Message m = servers[s].conn->receive(deadline, deadline);
    if (m.type != want) {
      throw ClientError("worker " + std::to_string(worker) + ": " + peer(s) + " answered " +
                        wire::to_string(m.type) + " instead of " + wire::to_string(want));
    }
    return m;
  }

  // Server s's answer of type `want` carrying its shard of the parameters, read into
  // `params` (the whole flat layout); its version is remembered for the next push.
  wire::Message receive_params(size_t s, MsgType want, float* params, wire::Deadline deadline) {
    Server& server = servers[s];
    wire::Message m = expect(s, want, deadline);
    expect_floats(s, m, server.shard.floats());
    server.conn->read_floats(params + server.shard.begin, m.floats, deadline);
    server.version = m.i[1];
    return m;
  }

  // Connects to server s and runs the handshake (ps/ps_auth.h): the server's challenge,
  // this worker's proof, the server's proof and its shard.
  void connect(size_t s, wire::Deadline deadline) {
    Server& server = servers[s];
    const int fd = wire::connect_to(server.address, deadline, peer(s));
    server.conn = std::make_unique<wire::Connection>(fd, peer(s));
    const wire::Message challenge = expect_handshake(s, MsgType::challenge, deadline);
    const std::string nonce = auth::nonce();
    const std::string proof = auth::worker_proof(options.token, challenge.text, nonce, worker);
    const int64_t hello[4] = {worker, 0, 0, 0};
    server.conn->send(MsgType::hello, hello, 0.0, {}, auth::join_hello({nonce, proof}), {},
                      deadline);
    // The server answers once it accepted us (serve() running), with the shard it holds:
    // a worker and a server that planned from different parameter lists stop here.
    const wire::Message ack = expect_handshake(s, MsgType::hello, deadline);
    const int64_t index = static_cast<int64_t>(s);
    if (!auth::constant_time_equal(
            ack.text, auth::server_proof(options.token, challenge.text, nonce, index))) {
      throw ClientError("worker " + std::to_string(worker) + ": " + peer(s) +
                        " did not prove it holds this job's token (another process on its "
                        "port?)");
    }
    if (ack.i[0] != index || ack.i[1] != server.shard.begin || ack.i[2] != server.shard.end) {
      throw ClientError("worker " + std::to_string(worker) + ": " + peer(s) + " is server " +
                        std::to_string(ack.i[0]) + " holding floats [" + std::to_string(ack.i[1]) +
                        ", " + std::to_string(ack.i[2]) + "), but this worker expects server " +
                        std::to_string(s) + " holding [" + std::to_string(server.shard.begin) +
                        ", " + std::to_string(server.shard.end) +
                        ") (do the model or the server count differ?)");
    }
  }

  // expect() during the handshake: a server that closes the connection here refused us.
  wire::Message expect_handshake(size_t s, MsgType want, wire::Deadline deadline) {
    try {
      return expect(s, want, deadline);
    } catch (const wire::WireError& e) {
      if (e.kind() != wire::WireError::Kind::closed) throw;
      throw ClientError("worker " + std::to_string(worker) + ": " + e.what() +
                        " during the handshake (the server refused this worker: does it hold "
                        "the same job token? The server's log says why)");
    }
  }

  void expect_floats(size_t s, const wire::Message& m, int64_t n) const {
    if (m.floats != n) {
      throw ClientError("worker " + std::to_string(worker) + ": " + peer(s) + " sent " +
                        std::to_string(m.floats) + " floats, its shard holds " + std::to_string(n));
    }
  }
};

PsClient::PsClient(const std::vector<std::string>& addresses, int worker,
                   std::vector<ServerShard> shards, ClientOptions options)
    : impl_(std::make_unique<Impl>()) {
  Impl& c = *impl_;
  c.worker = worker;
  c.options = options;
  if (addresses.empty() || addresses.size() != shards.size()) {
    throw ClientError("worker " + std::to_string(worker) + ": " + std::to_string(addresses.size()) +
                      " parameter-server addresses for " + std::to_string(shards.size()) +
                      " shards");
  }
  for (size_t s = 0; s < addresses.size(); ++s) {
    c.servers.push_back(Server{addresses[s], shards[s], nullptr, 0});
  }
  const wire::Deadline deadline = wire::deadline_in(options.connect_timeout);
  for (size_t s = 0; s < c.servers.size(); ++s) c.guarded([&] { c.connect(s, deadline); });
}

PsClient::~PsClient() = default;

void PsClient::seed(const float* params, const optim::OptimizerState& state, int64_t global_step) {
  Impl& c = *impl_;
  if (state.names.size() != state.buffers.size()) {
    throw ClientError("seed: the optimizer state has " + std::to_string(state.names.size()) +
                      " names for " + std::to_string(state.buffers.size()) + " buffers");
  }
  const std::string names = join_names(state.names);
  const int64_t i[4] = {global_step, state.step, 0, 0};
  for (size_t s = 0; s < c.servers.size(); ++s) {
    const ServerShard& shard = c.servers[s].shard;
    const auto n = static_cast<size_t>(shard.floats());
    std::vector<std::span<const float>> parts{{params + shard.begin, n}};
    for (size_t b = 0; b < state.buffers.size(); ++b) {
      if (static_cast<int64_t>(state.buffers[b].size()) < shard.end) {
        throw ClientError("seed: optimizer buffer " + state.names[b] + " holds " +
                          std::to_string(state.buffers[b].size()) + " floats, the layout " +
                          std::to_string(shard.end) + " or more");
      }
      parts.emplace_back(state.buffers[b].data() + shard.begin, n);
    }
    c.guarded([&] {
      c.servers[s].conn->send(MsgType::seed, i, 0.0, {}, names, parts, c.reply_deadline());
    });
  }
}

int64_t PsClient::pull(float* params) {
  Impl& c = *impl_;
  int64_t global_step = 0;
  c.guarded([&] {
    for (Server& server : c.servers) server.conn->send(MsgType::pull, c.reply_deadline());
    const wire::Deadline deadline = c.reply_deadline();
    for (size_t s = 0; s < c.servers.size(); ++s) {
      const wire::Message m = c.receive_params(s, MsgType::params, params, deadline);
      if (s == 0) global_step = m.i[0];
    }
  });
  return global_step;
}

PushReply PsClient::push(const float* grads, const PushInfo& info, float* params) {
  Impl& c = *impl_;
  PushReply reply;
  c.guarded([&] {
    int64_t sent = 0, received = 0;
    for (Server& server : c.servers) {
      sent -= server.conn->payload_bytes_sent();
      received -= server.conn->payload_bytes_received();
    }
    // Every server gets its range before we wait for any: they apply in parallel.
    for (Server& server : c.servers) {
      const int64_t i[4] = {info.local_step, info.loss_count, info.stop_request ? 1 : 0,
                            server.version};
      const std::span<const float> part(grads + server.shard.begin,
                                        static_cast<size_t>(server.shard.floats()));
      server.conn->send(MsgType::push, i, info.loss_sum, {}, std::string(), std::span(&part, 1),
                        c.reply_deadline());
    }
    const wire::Deadline deadline = c.reply_deadline();
    for (size_t s = 0; s < c.servers.size(); ++s) {
      const wire::Message m = c.receive_params(s, MsgType::reply, params, deadline);
      if (s != 0) continue;
      reply.global_step = m.i[0];
      reply.version = m.i[1];
      reply.done = (m.i[2] & wire::kFlagDone) != 0;
      reply.stop = (m.i[2] & wire::kFlagStop) != 0;
      reply.checkpoint = (m.i[2] & wire::kFlagCheckpoint) != 0;
      read_applied(m, m.i[3], reply);
    }
    for (Server& server : c.servers) {
      sent += server.conn->payload_bytes_sent();
      received += server.conn->payload_bytes_received();
    }
    reply.bytes_sent = sent;
    reply.bytes_received = received;
  });
  return reply;
}

optim::OptimizerState PsClient::fetch_state(float* params, int64_t total, PushReply* applied) {
  Impl& c = *impl_;
  optim::OptimizerState state;
  c.guarded([&] {
    for (Server& server : c.servers) {
      server.conn->send(MsgType::state_request, c.reply_deadline());
    }
    const wire::Deadline deadline = c.reply_deadline();
    for (size_t s = 0; s < c.servers.size(); ++s) {
      Server& server = c.servers[s];
      const wire::Message m = c.expect(s, MsgType::state, deadline);
      const std::vector<std::string> names = split_names(m.text);
      if (s == 0) {
        // Servers may have made different numbers of updates (K > 0: gradients arrive in
        // different orders at different servers); server 0's count stands for the state.
        state.step = m.i[0];
        state.names = names;
        if (applied != nullptr) {
          *applied = PushReply();
          read_applied(m, m.i[1], *applied);
        }
        state.buffers.assign(names.size(), std::vector<float>(static_cast<size_t>(total), 0.0f));
      } else if (names != state.names) {
        throw ClientError("worker " + std::to_string(c.worker) + ": " + c.peer(s) +
                          " keeps other optimizer buffers than server 0");
      }
      const int64_t n = server.shard.floats();
      c.expect_floats(s, m, n * static_cast<int64_t>(1 + names.size()));
      if (server.shard.end > total) {
        throw ClientError("fetch_state: the layout has " + std::to_string(total) + " floats, " +
                          c.peer(s) + " holds up to " + std::to_string(server.shard.end));
      }
      server.conn->read_floats(params + server.shard.begin, n, deadline);
      for (auto& buffer : state.buffers) {
        server.conn->read_floats(buffer.data() + server.shard.begin, n, deadline);
      }
    }
  });
  return state;
}

void PsClient::pause() {
  Impl& c = *impl_;
  c.guarded([&] {
    for (Server& server : c.servers) server.conn->send(MsgType::pause, c.reply_deadline());
  });
}

void PsClient::goodbye() {
  Impl& c = *impl_;
  if (c.said_goodbye) return;
  c.said_goodbye = true;
  c.guarded([&] {
    for (Server& server : c.servers) server.conn->send(MsgType::goodbye, c.reply_deadline());
  });
}

}  // namespace trainctl::ps
