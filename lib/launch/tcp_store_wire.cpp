#include "launch/tcp_store_wire.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

namespace trainctl::launch::wire {
namespace {

int remaining_ms(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  if (left.count() <= 0) return 0;
  return static_cast<int>(std::min<int64_t>(left.count(), 1 << 30));
}

// Waits until fd is ready for `events` or the deadline passes (SocketError, timed_out).
void wait_ready(int fd, short events, Clock::time_point deadline, const char* what) {
  for (;;) {
    pollfd p{fd, events, 0};
    int ms = remaining_ms(deadline);
    int rc = ::poll(&p, 1, ms);
    if (rc > 0) return;
    if (rc == 0) throw SocketError(std::string("timed out while ") + what, true);
    if (errno != EINTR) throw SocketError(std::string("poll: ") + std::strerror(errno), false);
  }
}

}  // namespace

bool Reader::raw(void* p, size_t n) {
  if (buf_.size() - off_ < n) return false;
  std::memcpy(p, buf_.data() + off_, n);
  off_ += n;
  return true;
}

bool Reader::str(std::string& s, uint32_t max) {
  uint32_t len = 0;
  if (!u32(len)) return false;
  if (len > max) {
    throw FieldTooLarge("field of " + std::to_string(len) + " bytes exceeds the limit of " +
                        std::to_string(max));
  }
  if (buf_.size() - off_ < len) return false;
  s.assign(buf_.data() + off_, len);
  off_ += len;
  return true;
}

int connect_once(const std::string& host, int port, Clock::time_point deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  std::string service = std::to_string(port);
  int gai = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
  if (gai != 0) {
    throw SocketError("cannot resolve '" + host + "': " + ::gai_strerror(gai), false);
  }
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> guard(found, &::freeaddrinfo);
  std::string last_error = "no address";
  for (addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    int fd =
        ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
    if (fd < 0) {
      last_error = std::string("socket: ") + std::strerror(errno);
      continue;
    }
    int rc = ::connect(fd, ai->ai_addr, ai->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      try {
        wait_ready(fd, POLLOUT, deadline, "connecting");
      } catch (...) {
        ::close(fd);
        throw;
      }
      int err = 0;
      socklen_t len = sizeof err;
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      rc = err == 0 ? 0 : -1;
      errno = err;
    }
    if (rc != 0) {
      last_error = std::strerror(errno);
      ::close(fd);
      continue;
    }
    int flags = ::fcntl(fd, F_GETFL);
    ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
  }
  throw SocketError(last_error, false);
}

void send_all(int fd, std::string_view data, Clock::time_point deadline) {
  size_t sent = 0;
  while (sent < data.size()) {
    ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      sent += static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      wait_ready(fd, POLLOUT, deadline, "sending");
    } else if (n < 0 && errno != EINTR) {
      throw SocketError(std::string("send: ") + std::strerror(errno), false);
    }
  }
}

void recv_exact(int fd, void* out, size_t n, Clock::time_point deadline) {
  auto* p = static_cast<char*>(out);
  size_t got = 0;
  while (got < n) {
    wait_ready(fd, POLLIN, deadline, "waiting for a reply");
    ssize_t r = ::recv(fd, p + got, n - got, MSG_DONTWAIT);
    if (r > 0) {
      got += static_cast<size_t>(r);
    } else if (r == 0) {
      throw SocketError("connection closed by the store", false);
    } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      throw SocketError(std::string("recv: ") + std::strerror(errno), false);
    }
  }
}

}  // namespace trainctl::launch::wire
