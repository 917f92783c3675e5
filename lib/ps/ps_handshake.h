#pragma once
// A parameter server's side of the handshake (ps/ps_auth.h), for every incoming
// connection at once (issue 36): the accept loop never waits on one connection, so idle or
// slow ones cannot hold up the workers; each gets `timeout` to prove it belongs to the job,
// and a connection that does not (no hello, a wrong token, garbage) is logged and closed
// while the server keeps accepting.
//
//   Handshakes hs(listen_fd, options);
//   loop: for (Joined& j : hs.step(until)) { check j.worker's slot; answer the hello }
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ps/ps_wire.h"

namespace trainctl::ps {

// Reads one worker hello from bytes as they arrive on a non-blocking socket, never asking
// for more than a hello may hold (ps/ps_auth.h: kMaxHelloText). Pure, so the fuzz target
// drives it directly.
class HelloReader {
 public:
  explicit HelloReader(std::string peer) : peer_(std::move(peer)) {}
  // How many more bytes the hello needs (0: complete).
  size_t wanted() const;
  // Takes n <= wanted() bytes. Throws wire::WireError (protocol) as soon as they cannot
  // be the start of a hello.
  void feed(const char* data, size_t n);
  bool complete() const { return wanted() == 0; }
  // Once complete: the worker index it claims and its text (nonce and proof).
  int64_t worker() const { return header_.i[0]; }
  const std::string& text() const { return text_; }

 private:
  std::string peer_;
  std::string head_;  // the header's bytes until all have come
  bool have_header_ = false;
  wire::Header header_;
  std::string text_;
};

struct HandshakeOptions {
  std::string token;  // the job token the workers must prove they hold
  int server = 0;     // this server's index (in the challenge)
  int workers = 1;    // a proof for worker index >= workers is refused
  std::string name;   // "parameter server 0", for the log
  // How long a connection may take from accept to a complete hello.
  std::chrono::milliseconds timeout{std::chrono::seconds(10)};
  // Connections in handshake at once; beyond, the oldest is closed (they are the likeliest
  // to be idle: a worker completes its handshake within a round trip).
  size_t max_pending = 256;
};

// A connection that proved it is worker `worker`: the server answers its hello with
// `ack_proof` (or drops it, when that worker is connected already).
struct Joined {
  std::unique_ptr<wire::Connection> conn;
  int worker = 0;
  std::string ack_proof;
};

class Handshakes {
 public:
  Handshakes(int listen_fd, HandshakeOptions options);
  ~Handshakes();  // closes the connections still in handshake
  Handshakes(const Handshakes&) = delete;
  Handshakes& operator=(const Handshakes&) = delete;

  // Accepts new connections and advances every pending handshake until `until` or until a
  // worker completed its own; returns those that did. Throws wire::WireError only when the
  // listening socket fails.
  std::vector<Joined> step(wire::Deadline until);
  // Connections refused so far, and why the last one was (for the server's final error).
  int64_t refused() const { return refused_; }
  const std::string& last_refusal() const { return last_refusal_; }

 private:
  struct Pending;
  void accept_new();
  void start(int fd);
  // Reads what pending connection p sent; returns true when it is finished (joined or
  // refused) and must leave the pending list.
  bool advance(Pending& p, std::vector<Joined>& joined);
  bool verify(Pending& p, std::vector<Joined>& joined);
  void refuse(Pending& p, const std::string& why);
  void expire(wire::Clock::time_point now);

  int listen_fd_;
  HandshakeOptions options_;
  std::vector<std::unique_ptr<Pending>> pending_;
  int64_t refused_ = 0;
  std::string last_refusal_;
  // Refusals are logged at most once a second (strangers can cause them at will).
  wire::Clock::time_point last_log_{};
  int64_t held_back_ = 0;
};

}  // namespace trainctl::ps
