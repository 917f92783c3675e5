#include "ps/ps_wire.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <sstream>
#include <thread>

namespace trainctl::ps::wire {

namespace {

constexpr uint32_t kMagic = 0x53505443;  // "CTPS"
// Bounds on a header's counts, so a corrupt or foreign header fails cleanly instead of
// asking for an absurd allocation.
constexpr int64_t kMaxInts = 1 << 20;
constexpr int64_t kMaxText = 1 << 20;
constexpr int64_t kMaxFloats = int64_t{1} << 40;

std::string errno_text(int err) { return std::strerror(err); }

// Milliseconds until `deadline` for poll(): -1 for none, 0 once passed.
int poll_ms(Deadline deadline) {
  if (deadline == Deadline::max()) return -1;
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left, 0, INT_MAX));
}

// Waits until `fd` is ready for `events`; false when the deadline passed first. Errors
// and hang-ups count as ready: the read or write that follows reports them.
bool wait_for(int fd, short events, Deadline deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, poll_ms(deadline));
    if (r > 0) return true;
    if (r == 0) {
      if (deadline != Deadline::max() && Clock::now() < deadline) continue;  // rounding
      return false;
    }
    if (errno != EINTR) throw WireError(WireError::Kind::io, "poll: " + errno_text(errno));
  }
}

void set_nodelay(int fd) {
  // Small messages (a pull, a reply's header) must not wait for an ACK (Nagle).
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

bool valid_type(uint32_t t) {
  return t >= static_cast<uint32_t>(MsgType::hello) &&
         t <= static_cast<uint32_t>(MsgType::challenge);
}

struct AddrInfo {
  addrinfo* list = nullptr;
  ~AddrInfo() {
    if (list) ::freeaddrinfo(list);
  }
};

}  // namespace

const char* to_string(MsgType t) {
  switch (t) {
    case MsgType::hello:
      return "hello";
    case MsgType::seed:
      return "seed";
    case MsgType::pull:
      return "pull";
    case MsgType::params:
      return "params";
    case MsgType::push:
      return "push";
    case MsgType::reply:
      return "reply";
    case MsgType::state_request:
      return "state request";
    case MsgType::state:
      return "state";
    case MsgType::goodbye:
      return "goodbye";
    case MsgType::pause:
      return "pause";
    case MsgType::challenge:
      return "challenge";
  }
  return "unknown";
}

std::string join_names(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += (i ? "\n" : "") + names[i];
  return out;
}

std::vector<std::string> split_names(const std::string& text) {
  std::vector<std::string> names;
  if (text.empty()) return names;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) names.push_back(line);
  return names;
}

Header decode_header(std::span<const char, sizeof(Header)> bytes, const std::string& peer) {
  Header h;
  std::memcpy(&h, bytes.data(), sizeof(Header));
  const auto fail = [&](const std::string& what) {
    throw WireError(WireError::Kind::protocol, peer + ": " + what);
  };
  if (h.magic != kMagic) fail("not a trainctl parameter-server message (bad magic)");
  if (!valid_type(h.type)) fail("unknown message type " + std::to_string(h.type));
  if (h.ints < 0 || h.ints > kMaxInts || h.text < 0 || h.text > kMaxText || h.floats < 0 ||
      h.floats > kMaxFloats) {
    fail("message sizes out of range");
  }
  return h;
}

std::vector<char> encode_head(MsgType type, const int64_t (&i)[4], double x,
                              std::span<const int64_t> ints, const std::string& text,
                              int64_t floats) {
  Header h;
  h.magic = kMagic;
  h.type = static_cast<uint32_t>(type);
  std::copy(std::begin(i), std::end(i), std::begin(h.i));
  h.x = x;
  h.ints = static_cast<int64_t>(ints.size());
  h.text = static_cast<int64_t>(text.size());
  h.floats = floats;
  // One allocation and plain copies (GCC 12 misreads vector::insert of a zero-length
  // range as an overflow under -O3).
  std::vector<char> head(sizeof(Header) + ints.size_bytes() + text.size());
  std::memcpy(head.data(), &h, sizeof(Header));
  if (!ints.empty()) std::memcpy(head.data() + sizeof(Header), ints.data(), ints.size_bytes());
  if (!text.empty()) {
    std::memcpy(head.data() + sizeof(Header) + ints.size_bytes(), text.data(), text.size());
  }
  return head;
}

Connection::Connection(int fd, std::string peer) : fd_(fd), peer_(std::move(peer)) {
  set_nodelay(fd_);
}

Connection::~Connection() { ::close(fd_); }

void Connection::fail(WireError::Kind kind, const std::string& what) const {
  throw WireError(kind, peer_ + ": " + what);
}

void Connection::shutdown() { ::shutdown(fd_, SHUT_RDWR); }

void Connection::write_all(const void* data, size_t n, Deadline deadline) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    if (!wait_for(fd_, POLLOUT, deadline)) fail(WireError::Kind::timeout, "send timed out");
    // MSG_NOSIGNAL: a peer that died is an error here, not a SIGPIPE for the process.
    const ssize_t r = ::send(fd_, p, n, MSG_NOSIGNAL);
    if (r > 0) {
      p += r;
      n -= static_cast<size_t>(r);
    } else if (r < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) {
      continue;
    } else if (r < 0 && (errno == EPIPE || errno == ECONNRESET)) {
      fail(WireError::Kind::closed, "connection closed by the other end");
    } else {
      fail(WireError::Kind::io, std::string("send: ") + errno_text(errno));
    }
  }
}

void Connection::read_exact(void* data, size_t n, Deadline deadline) {
  auto* p = static_cast<char*>(data);
  while (n > 0) {
    if (!wait_for(fd_, POLLIN, deadline)) fail(WireError::Kind::timeout, "receive timed out");
    const ssize_t r = ::recv(fd_, p, n, 0);
    if (r > 0) {
      p += r;
      n -= static_cast<size_t>(r);
    } else if (r == 0) {
      fail(WireError::Kind::closed, "connection closed by the other end");
    } else if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) {
      continue;
    } else if (errno == ECONNRESET || errno == EPIPE) {
      fail(WireError::Kind::closed, "connection reset by the other end");
    } else {
      fail(WireError::Kind::io, std::string("recv: ") + errno_text(errno));
    }
  }
}

void Connection::send(MsgType type, const int64_t (&i)[4], double x, std::span<const int64_t> ints,
                      const std::string& text, std::span<const std::span<const float>> payload,
                      Deadline deadline) {
  int64_t floats = 0;
  for (const auto& part : payload) floats += static_cast<int64_t>(part.size());
  // Header, ints and text in one write; the float ranges straight from their buffers.
  const std::vector<char> head = encode_head(type, i, x, ints, text, floats);
  write_all(head.data(), head.size(), deadline);
  for (const auto& part : payload) {
    if (part.empty()) continue;
    write_all(part.data(), part.size_bytes(), deadline);
    bytes_sent_ += static_cast<int64_t>(part.size_bytes());
  }
}

void Connection::send(MsgType type, Deadline deadline) {
  const int64_t none[4] = {0, 0, 0, 0};
  send(type, none, 0.0, {}, std::string(), {}, deadline);
}

Message Connection::receive(Deadline until, Deadline deadline) {
  if (!wait_for(fd_, POLLIN, until))
    fail(WireError::Kind::timeout, "timed out waiting for a message");
  char raw[sizeof(Header)];
  read_exact(raw, sizeof(raw), deadline);
  const Header h = decode_header(raw, peer_);
  Message m;
  m.type = static_cast<MsgType>(h.type);
  std::copy(std::begin(h.i), std::end(h.i), std::begin(m.i));
  m.x = h.x;
  m.floats = h.floats;
  m.ints.resize(static_cast<size_t>(h.ints));
  if (h.ints > 0) read_exact(m.ints.data(), m.ints.size() * sizeof(int64_t), deadline);
  m.text.resize(static_cast<size_t>(h.text));
  if (h.text > 0) read_exact(m.text.data(), m.text.size(), deadline);
  return m;
}

void Connection::read_floats(float* dst, int64_t n, Deadline deadline) {
  if (n <= 0) return;
  read_exact(dst, static_cast<size_t>(n) * sizeof(float), deadline);
  bytes_received_ += n * static_cast<int64_t>(sizeof(float));
}

int listen_on(const std::string& bind_addr, int backlog, int* port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  AddrInfo ai;
  const int rc = ::getaddrinfo(bind_addr.c_str(), "0", &hints, &ai.list);
  if (rc != 0) {
    throw WireError(WireError::Kind::io,
                    "cannot resolve bind address " + bind_addr + ": " + ::gai_strerror(rc));
  }
  std::string last = "no address";
  for (addrinfo* a = ai.list; a; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      last = errno_text(errno);
      continue;
    }
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, backlog) == 0) {
      sockaddr_storage ss{};
      socklen_t len = sizeof(ss);
      if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) == 0) {
        *port = ss.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                                         : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
        return fd;
      }
    }
    last = errno_text(errno);
    ::close(fd);
  }
  throw WireError(WireError::Kind::io, "cannot listen on " + bind_addr + ": " + last);
}

int accept_before(int listen_fd, Deadline deadline, bool* out_of_fds) {
  if (out_of_fds) *out_of_fds = false;
  if (!wait_for(listen_fd, POLLIN, deadline)) return -1;
  const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd >= 0) return fd;
  // The connection went away before we took it, or a signal: nothing to accept now.
  if (errno == EINTR || errno == ECONNABORTED || errno == EAGAIN || errno == EWOULDBLOCK) {
    return -1;
  }
  // Too many connections open (idle ones, say): the caller closes some and tries again.
  if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
    if (out_of_fds) *out_of_fds = true;
    return -1;
  }
  throw WireError(WireError::Kind::io, std::string("accept: ") + errno_text(errno));
}

namespace {

// One connection attempt to one address, bounded by `deadline`: -1 and `err` on failure.
int try_connect(const addrinfo* a, Deadline deadline, std::string* err) {
  const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
  if (fd < 0) {
    *err = errno_text(errno);
    return -1;
  }
  // Non-blocking connect, so an unreachable host costs at most the deadline, not the
  // kernel's SYN retries.
  const int flags = ::fcntl(fd, F_GETFL, 0);
  ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  int rc = ::connect(fd, a->ai_addr, a->ai_addrlen);
  if (rc != 0 && errno == EINPROGRESS) {
    if (!wait_for(fd, POLLOUT, deadline)) {
      *err = "timed out";
      ::close(fd);
      return -1;
    }
    int so_error = 0;
    socklen_t len = sizeof(so_error);
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len);
    rc = so_error == 0 ? 0 : -1;
    errno = so_error;
  }
  if (rc != 0) {
    *err = errno_text(errno);
    ::close(fd);
    return -1;
  }
  ::fcntl(fd, F_SETFL, flags);
  return fd;
}

}  // namespace

int connect_to(const std::string& address, Deadline deadline, const std::string& peer) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) {
    throw WireError(WireError::Kind::io, peer + ": address '" + address + "' is not host:port");
  }
  std::string host = address.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  const std::string port = address.substr(colon + 1);
  std::string last;
  auto pause = std::chrono::milliseconds(20);
  for (;;) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    AddrInfo ai;
    const int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &ai.list);
    if (rc != 0) {
      last = std::string("cannot resolve ") + host + ": " + ::gai_strerror(rc);
    } else {
      for (addrinfo* a = ai.list; a; a = a->ai_next) {
        // A single attempt waits at most a few seconds, so the loop retries the others.
        const Deadline attempt = std::min(deadline, Clock::now() + std::chrono::seconds(5));
        const int fd = try_connect(a, attempt, &last);
        if (fd >= 0) return fd;
      }
    }
    if (Clock::now() + pause >= deadline) {
      throw WireError(WireError::Kind::timeout,
                      peer + ": cannot connect to " + address + " (" + last + ")");
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(500));
  }
}

}  // namespace trainctl::ps::wire
