#include "ps/ps_handshake.h"

#include <netdb.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include "ps/ps_auth.h"

namespace trainctl::ps {

namespace {

using wire::Clock;
using wire::WireError;

// "10.0.0.2:41234" for the log; "a peer" when the socket cannot say.
std::string peer_address(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  char host[NI_MAXHOST], port[NI_MAXSERV];
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0 ||
      ::getnameinfo(reinterpret_cast<sockaddr*>(&ss), len, host, sizeof(host), port, sizeof(port),
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return "a peer";
  }
  return std::string(host) + ":" + port;
}

int poll_ms(Clock::time_point until) {
  if (until == wire::no_deadline()) return -1;
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left, 0, INT_MAX));
}

}  // namespace

size_t HelloReader::wanted() const {
  if (!have_header_) return sizeof(wire::Header) - head_.size();
  return static_cast<size_t>(header_.text) - text_.size();
}

void HelloReader::feed(const char* data, size_t n) {
  if (n > wanted()) throw std::logic_error("HelloReader::feed: more bytes than wanted");
  if (!have_header_) {
    head_.append(data, n);
    if (head_.size() < sizeof(wire::Header)) return;
    header_ = wire::decode_header(
        std::span<const char, sizeof(wire::Header)>(head_.data(), sizeof(wire::Header)), peer_);
    have_header_ = true;
    if (header_.type != static_cast<uint32_t>(wire::MsgType::hello)) {
      throw WireError(WireError::Kind::protocol,
                      peer_ + ": sent " +
                          wire::to_string(static_cast<wire::MsgType>(header_.type)) +
                          " instead of hello");
    }
    if (header_.ints != 0 || header_.floats != 0 ||
        header_.text > static_cast<int64_t>(auth::kMaxHelloText)) {
      throw WireError(WireError::Kind::protocol, peer_ + ": a hello of the wrong size");
    }
    return;
  }
  text_.append(data, n);
}

struct Handshakes::Pending {
  int fd = -1;
  std::string from;
  std::string nonce;
  Clock::time_point deadline;
  HelloReader reader;
  Pending(int f, std::string address, std::string n, Clock::time_point d)
      : fd(f), from(address), nonce(std::move(n)), deadline(d), reader(std::move(address)) {}
  ~Pending() {
    if (fd >= 0) ::close(fd);
  }
  Pending(const Pending&) = delete;
  Pending& operator=(const Pending&) = delete;
};

Handshakes::Handshakes(int listen_fd, HandshakeOptions options)
    : listen_fd_(listen_fd), options_(std::move(options)) {}

Handshakes::~Handshakes() = default;

void Handshakes::refuse(Pending& p, const std::string& why) {
  ++refused_;
  last_refusal_ = p.from + ": " + why;
  const Clock::time_point now = Clock::now();
  if (refused_ > 1 && now - last_log_ < std::chrono::seconds(1)) {
    ++held_back_;
  } else {
    spdlog::warn("{}: refused a connection from {}{}", options_.name, last_refusal_,
                 held_back_ > 0
                     ? " (and " + std::to_string(held_back_) + " more since the last such line)"
                     : std::string());
    held_back_ = 0;
    last_log_ = now;
  }
  ::close(p.fd);
  p.fd = -1;
}

void Handshakes::start(int fd) {
  auto p = std::make_unique<Pending>(fd, peer_address(fd), auth::nonce(),
                                     Clock::now() + options_.timeout);
  const int64_t i[4] = {options_.server, 0, 0, 0};
  const std::vector<char> challenge =
      wire::encode_head(wire::MsgType::challenge, i, 0.0, {}, p->nonce, 0);
  // A fresh socket's send buffer holds these hundred bytes: never a wait.
  const ssize_t sent = ::send(fd, challenge.data(), challenge.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  if (sent != static_cast<ssize_t>(challenge.size())) {
    refuse(*p, "could not send the challenge");
    return;
  }
  if (pending_.size() >= options_.max_pending) {
    refuse(*pending_.front(), "too many connections in handshake; closed the oldest");
    pending_.erase(pending_.begin());
  }
  pending_.push_back(std::move(p));
}

void Handshakes::accept_new() {
  // A bounded batch, so a flood of connections cannot starve the pending handshakes.
  for (int k = 0; k < 64; ++k) {
    bool out_of_fds = false;
    const int fd = wire::accept_before(listen_fd_, Clock::now(), &out_of_fds);
    if (fd >= 0) {
      start(fd);
      continue;
    }
    if (out_of_fds && !pending_.empty()) {
      refuse(*pending_.front(), "out of file descriptors; closed the oldest handshake");
      pending_.erase(pending_.begin());
      continue;
    }
    return;
  }
}

bool Handshakes::verify(Pending& p, std::vector<Joined>& joined) {
  auth::HelloText hello;
  if (!auth::parse_hello(p.reader.text(), &hello)) {
    refuse(p, "a hello without a proof of the job token (not a worker of this job)");
    return true;
  }
  const int64_t w = p.reader.worker();
  const std::string expected = auth::worker_proof(options_.token, p.nonce, hello.client_nonce, w);
  if (!auth::constant_time_equal(hello.proof, expected)) {
    refuse(p, "a hello claiming worker " + std::to_string(w) +
                  " with a wrong proof (not this job's token)");
    return true;
  }
  if (w < 0 || w >= options_.workers) {
    refuse(p, "a hello claiming worker " + std::to_string(w) + ", which does not exist (" +
                  std::to_string(options_.workers) + " workers)");
    return true;
  }
  Joined j;
  j.conn = std::make_unique<wire::Connection>(p.fd, "worker " + std::to_string(w));
  p.fd = -1;  // the connection owns it now
  j.worker = static_cast<int>(w);
  j.ack_proof = auth::server_proof(options_.token, p.nonce, hello.client_nonce, options_.server);
  joined.push_back(std::move(j));
  return true;
}

bool Handshakes::advance(Pending& p, std::vector<Joined>& joined) {
  char buf[256];
  try {
    while (!p.reader.complete()) {
      const size_t want = std::min(sizeof(buf), p.reader.wanted());
      const ssize_t r = ::recv(p.fd, buf, want, MSG_DONTWAIT);
      if (r > 0) {
        p.reader.feed(buf, static_cast<size_t>(r));
      } else if (r == 0) {
        refuse(p, "closed the connection before its hello");
        return true;
      } else if (errno == EINTR) {
        continue;
      } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
        return false;
      } else {
        refuse(p, std::string("recv: ") + std::strerror(errno));
        return true;
      }
    }
  } catch (const WireError& e) {
    refuse(p, e.what());
    return true;
  }
  return verify(p, joined);
}

void Handshakes::expire(Clock::time_point now) {
  std::erase_if(pending_, [&](const std::unique_ptr<Pending>& p) {
    if (now < p->deadline) return false;
    refuse(*p, "no hello within " + std::to_string(options_.timeout.count()) + " ms");
    return true;
  });
}

std::vector<Joined> Handshakes::step(wire::Deadline until) {
  std::vector<Joined> joined;
  expire(Clock::now());
  Clock::time_point wake = until;
  for (const auto& p : pending_) wake = std::min(wake, p->deadline);
  std::vector<pollfd> fds{{listen_fd_, POLLIN, 0}};
  for (const auto& p : pending_) fds.push_back({p->fd, POLLIN, 0});
  const int r = ::poll(fds.data(), fds.size(), poll_ms(wake));
  if (r < 0 && errno != EINTR) {
    throw WireError(WireError::Kind::io, std::string("poll: ") + std::strerror(errno));
  }
  if (r <= 0) return joined;
  // The pending connections first (accepting may close the oldest of them).
  std::vector<Pending*> ready;
  for (size_t k = 1; k < fds.size(); ++k) {
    if (fds[k].revents != 0) ready.push_back(pending_[k - 1].get());
  }
  std::vector<const Pending*> finished;
  for (Pending* p : ready) {
    if (advance(*p, joined)) finished.push_back(p);
  }
  std::erase_if(pending_, [&](const std::unique_ptr<Pending>& p) {
    return std::find(finished.begin(), finished.end(), p.get()) != finished.end();
  });
  if (fds[0].revents != 0) accept_new();
  return joined;
}

}  // namespace trainctl::ps
