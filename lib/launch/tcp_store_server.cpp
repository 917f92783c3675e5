#include "launch/tcp_store_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <thread>
#include <vector>

#include "launch/repeat_limiter.h"
#include "launch/tcp_store_wire.h"
#include "util/error.h"

namespace trainctl::launch {
namespace {

using wire::Clock;

// Unauthenticated connections get this long to present the token.
constexpr auto kHelloTimeout = std::chrono::seconds(10);

// A get or wait that could not be answered yet: the reply is sent when its keys appear
// or at its deadline.
struct Pending {
  wire::Op op;
  std::vector<std::string> keys;
  Clock::time_point deadline;
};

struct Conn {
  int fd = -1;
  bool authenticated = false;
  bool close_after_flush = false;
  Clock::time_point accepted_at;
  std::string in;
  std::string out;
  std::optional<Pending> pending;  // set while the client waits for keys
};

std::string peer_name(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "?";
  char host[INET6_ADDRSTRLEN] = "?";
  if (ss.ss_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&ss)->sin_addr, host, sizeof host);
  } else if (ss.ss_family == AF_INET6) {
    ::inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&ss)->sin6_addr, host, sizeof host);
  }
  return host;
}

}  // namespace

bool constant_time_equal(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  }
  return diff == 0;
}

struct TcpStoreServer::Impl {
  std::string token;
  int listen_fd = -1;
  int wake_pipe[2] = {-1, -1};
  int port = 0;
  std::thread thread;
  // Owned by the serving thread only.
  std::map<std::string, std::string> data;
  std::vector<std::unique_ptr<Conn>> conns;
  // Refused clients (wrong token, garbage): logged at most once per second, with a count.
  RepeatLimiter refused_log{std::chrono::seconds(1)};

  void serve();
  void log_refused(const std::string& what);
  void accept_all();
  void read_from(Conn& c);
  void process(Conn& c);
  // Each returns false when the buffer holds no complete request (yet).
  bool handle_one(Conn& c);
  bool handle_hello(Conn& c, wire::Reader& r);
  bool handle_set(Conn& c, wire::Reader& r);
  bool handle_add(Conn& c, wire::Reader& r);
  bool handle_check(Conn& c, wire::Reader& r);
  bool handle_get_or_wait(Conn& c, wire::Reader& r, wire::Op op);
  void reply_status(Conn& c, wire::Status status);
  void complete_waiters(Conn& writer);
  bool try_complete(Conn& c);
  void expire(Clock::time_point now);
  void close_conn(Conn& c) {
    if (c.fd >= 0) ::close(c.fd);
    c.fd = -1;
  }
  bool all_present(const std::vector<std::string>& keys) const {
    return std::all_of(keys.begin(), keys.end(),
                       [&](const std::string& k) { return data.count(k) > 0; });
  }
};

TcpStoreServer::TcpStoreServer(std::string token, int port, const std::string& bind_addr)
    : impl_(std::make_unique<Impl>()) {
  impl_->token = std::move(token);
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) throw RendezvousError(std::string("store: socket: ") + std::strerror(errno));
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::inet_pton(AF_INET, bind_addr.c_str(), &addr.sin_addr) != 1) {
    ::close(fd);
    throw RendezvousError("store: '" + bind_addr + "' is not an IPv4 address to listen on");
  }
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, 512) != 0) {
    int err = errno;
    ::close(fd);
    throw RendezvousError("cannot start the rendezvous store on " + bind_addr + ":" +
                          std::to_string(port) + ": " + std::strerror(err) +
                          " (another job on this node may use the port: pick another "
                          "--master-port)");
  }
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  impl_->port = ntohs(addr.sin_port);
  impl_->listen_fd = fd;
  if (::pipe2(impl_->wake_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    ::close(fd);
    throw RendezvousError(std::string("store: pipe: ") + std::strerror(errno));
  }
  impl_->thread = std::thread([impl = impl_.get()] { impl->serve(); });
}

TcpStoreServer::~TcpStoreServer() {
  char byte = 1;
  ssize_t ignored = ::write(impl_->wake_pipe[1], &byte, 1);
  (void)ignored;
  impl_->thread.join();
  for (auto& c : impl_->conns) impl_->close_conn(*c);
  ::close(impl_->listen_fd);
  ::close(impl_->wake_pipe[0]);
  ::close(impl_->wake_pipe[1]);
}

int TcpStoreServer::port() const { return impl_->port; }

void TcpStoreServer::Impl::serve() {
  std::vector<pollfd> fds;
  for (;;) {
    fds.clear();
    fds.push_back({wake_pipe[0], POLLIN, 0});
    fds.push_back({listen_fd, POLLIN, 0});
    Clock::time_point next_deadline = Clock::now() + std::chrono::seconds(1);
    for (auto& c : conns) {
      short events = POLLIN;
      if (!c->out.empty()) events |= POLLOUT;
      fds.push_back({c->fd, events, 0});
      if (c->pending) next_deadline = std::min(next_deadline, c->pending->deadline);
      if (!c->authenticated)
        next_deadline = std::min(next_deadline, c->accepted_at + kHelloTimeout);
    }
    auto wait_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(next_deadline - Clock::now());
    int timeout = static_cast<int>(std::clamp<int64_t>(wait_ms.count() + 1, 0, 1000));
    int rc = ::poll(fds.data(), fds.size(), timeout);
    if (rc < 0 && errno != EINTR) {
      spdlog::error("rendezvous store: poll failed: {}", std::strerror(errno));
      return;
    }
    if (fds[0].revents != 0) return;  // asked to stop
    if (rc > 0) {
      for (size_t i = 0; i < conns.size(); ++i) {
        Conn& c = *conns[i];
        short rev = fds[i + 2].revents;
        if (c.fd >= 0 && (rev & (POLLIN | POLLHUP | POLLERR))) read_from(c);
      }
      if (fds[1].revents & POLLIN) accept_all();
    }
    expire(Clock::now());
    if (auto held_back = refused_log.overdue(Clock::now())) {
      spdlog::warn("rendezvous store: refused {} more client(s) (wrong token or garbage)",
                   *held_back);
    }
    // Replies go out right away; what the socket does not take waits for POLLOUT.
    for (auto& c : conns) {
      if (c->fd >= 0 && !c->out.empty()) {
        ssize_t n = ::send(c->fd, c->out.data(), c->out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
          c->out.erase(0, static_cast<size_t>(n));
        } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
          close_conn(*c);
        }
      }
      if (c->fd >= 0 && c->close_after_flush && c->out.empty()) close_conn(*c);
    }
    std::erase_if(conns, [](const std::unique_ptr<Conn>& c) { return c->fd < 0; });
  }
}

void TcpStoreServer::Impl::log_refused(const std::string& what) {
  if (auto held_back = refused_log.admit(Clock::now())) {
    if (*held_back == 0) {
      spdlog::warn("rendezvous store: {}", what);
    } else {
      spdlog::warn("rendezvous store: {} (and {} more refused clients in the last second)", what,
                   *held_back);
    }
  }
}

void TcpStoreServer::Impl::accept_all() {
  for (;;) {
    int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;  // EAGAIN: nothing more; other errors: try again next round
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    auto c = std::make_unique<Conn>();
    c->fd = fd;
    c->accepted_at = Clock::now();
    conns.push_back(std::move(c));
  }
}

void TcpStoreServer::Impl::read_from(Conn& c) {
  char buf[64 * 1024];
  for (;;) {
    ssize_t n = ::recv(c.fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) {
      c.in.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      close_conn(c);
      return;
    }
    break;
  }
  process(c);
}

void TcpStoreServer::Impl::process(Conn& c) {
  try {
    while (c.fd >= 0 && !c.close_after_flush && !c.pending && handle_one(c)) {
    }
  } catch (const wire::FieldTooLarge& e) {
    log_refused("dropped a client from " + peer_name(c.fd) + ": " + e.what());
    close_conn(c);
  }
}

bool TcpStoreServer::Impl::handle_one(Conn& c) {
  wire::Reader r(c.in);
  if (!c.authenticated) return handle_hello(c, r);
  uint8_t op_byte = 0;
  if (!r.u8(op_byte)) return false;
  const auto op = static_cast<wire::Op>(op_byte);
  switch (op) {
    case wire::Op::set:
      return handle_set(c, r);
    case wire::Op::add:
      return handle_add(c, r);
    case wire::Op::check:
      return handle_check(c, r);
    case wire::Op::get:
    case wire::Op::wait:
      return handle_get_or_wait(c, r, op);
  }
  throw wire::FieldTooLarge("unknown request " + std::to_string(op_byte));
}

// The first request of a connection: the job token.
bool TcpStoreServer::Impl::handle_hello(Conn& c, wire::Reader& r) {
  std::string presented;
  if (!r.str(presented, wire::kMaxTokenBytes)) return false;
  c.in.erase(0, r.consumed());
  if (constant_time_equal(presented, token)) {
    c.authenticated = true;
    reply_status(c, wire::Status::ok);
  } else {
    log_refused("rejected a client from " + peer_name(c.fd) + " that presented a wrong job token");
    reply_status(c, wire::Status::rejected);
    c.close_after_flush = true;
  }
  return true;
}

bool TcpStoreServer::Impl::handle_set(Conn& c, wire::Reader& r) {
  std::string key, value;
  if (!r.str(key, wire::kMaxFieldBytes) || !r.str(value, wire::kMaxFieldBytes)) return false;
  c.in.erase(0, r.consumed());
  data[key] = std::move(value);
  reply_status(c, wire::Status::ok);
  complete_waiters(c);
  return true;
}

bool TcpStoreServer::Impl::handle_add(Conn& c, wire::Reader& r) {
  std::string key;
  int64_t delta = 0;
  if (!r.str(key, wire::kMaxFieldBytes) || !r.i64(delta)) return false;
  c.in.erase(0, r.consumed());
  int64_t value = 0;
  if (auto it = data.find(key); it != data.end()) {
    try {
      value = std::stoll(it->second);
    } catch (const std::exception&) {
      value = 0;  // a non-numeric value restarts the counter, as torch's TCPStore would fail
    }
  }
  value += delta;
  data[key] = std::to_string(value);
  wire::Writer w;
  w.u8(static_cast<uint8_t>(wire::Status::ok));
  w.i64(value);
  c.out += w.bytes();
  complete_waiters(c);
  return true;
}

bool TcpStoreServer::Impl::handle_check(Conn& c, wire::Reader& r) {
  uint32_t n = 0;
  if (!r.u32(n)) return false;
  std::vector<std::string> keys(std::min<uint32_t>(n, 1 << 16));
  if (n > keys.size()) throw wire::FieldTooLarge("too many keys in one request");
  for (auto& k : keys) {
    if (!r.str(k, wire::kMaxFieldBytes)) return false;
  }
  c.in.erase(0, r.consumed());
  wire::Writer w;
  w.u8(static_cast<uint8_t>(wire::Status::ok));
  w.u8(all_present(keys) ? 1 : 0);
  c.out += w.bytes();
  return true;
}

// get (one key, its value in the reply) and wait (keys, no value): answered now when the
// keys exist, else parked until they appear or the request's timeout passes.
bool TcpStoreServer::Impl::handle_get_or_wait(Conn& c, wire::Reader& r, wire::Op op) {
  Pending p{op, {}, {}};
  if (op == wire::Op::get) {
    p.keys.resize(1);
    if (!r.str(p.keys[0], wire::kMaxFieldBytes)) return false;
  } else {
    uint32_t n = 0;
    if (!r.u32(n)) return false;
    if (n > (1 << 16)) throw wire::FieldTooLarge("too many keys in one request");
    p.keys.resize(n);
    for (auto& k : p.keys) {
      if (!r.str(k, wire::kMaxFieldBytes)) return false;
    }
  }
  uint64_t timeout_ms = 0;
  if (!r.u64(timeout_ms)) return false;
  c.in.erase(0, r.consumed());
  timeout_ms = std::min<uint64_t>(timeout_ms, uint64_t{1} << 40);
  p.deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  c.pending = std::move(p);
  try_complete(c);  // if not complete: parked until its keys appear or it times out
  return true;
}

void TcpStoreServer::Impl::reply_status(Conn& c, wire::Status status) {
  c.out.push_back(static_cast<char>(status));
}

// A write (by `writer`) may complete requests parked on other connections.
void TcpStoreServer::Impl::complete_waiters(Conn& writer) {
  for (auto& other : conns) {
    if (other.get() != &writer && other->fd >= 0 && other->pending && try_complete(*other)) {
      process(*other);
    }
  }
}

bool TcpStoreServer::Impl::try_complete(Conn& c) {
  if (!all_present(c.pending->keys)) return false;
  wire::Writer w;
  w.u8(static_cast<uint8_t>(wire::Status::ok));
  if (c.pending->op == wire::Op::get) w.str(data.at(c.pending->keys[0]));
  c.out += w.bytes();
  c.pending.reset();
  return true;
}

void TcpStoreServer::Impl::expire(Clock::time_point now) {
  for (auto& c : conns) {
    if (c->fd < 0) continue;
    if (!c->authenticated && now - c->accepted_at > kHelloTimeout) {
      close_conn(*c);
    } else if (c->pending && now >= c->pending->deadline) {
      c->pending.reset();
      c->out.push_back(static_cast<char>(wire::Status::timeout));
    }
  }
}

}  // namespace trainctl::launch
