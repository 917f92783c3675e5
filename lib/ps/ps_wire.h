#pragma once
// The parameter-server protocol's framing (internal to ps/): one message = a fixed header,
// then `ints` int64 values, `text` bytes and `floats` float32 values, over a blocking TCP
// socket. Both ends run the same build on the same kind of machine, so values travel in
// the host's byte order; the magic number catches a peer that is not a trainctl ps.
//
// Every blocking call takes a deadline (Deadline::max() = wait forever) and throws
// WireError naming the peer; shutdown() from another thread wakes a blocked call.
#include <chrono>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace trainctl::ps::wire {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;
inline Deadline no_deadline() { return Deadline::max(); }
inline Deadline deadline_in(std::chrono::milliseconds d) { return Clock::now() + d; }

enum class MsgType : uint32_t {
  hello = 1,          // worker -> server: i[0] = worker; text = its nonce and proof
                      // (ps/ps_auth.h); server -> worker: i[0] = server, i[1], i[2] = its
                      // shard's [begin, end); text = the server's proof
  seed = 2,           // i[0] = global step, i[1] = optimizer step; text = buffer names
                      // ('\n'-separated); floats = params range, then each buffer's range
  pull = 3,           // (nothing)
  params = 4,         // i[0] = global step, i[1] = version; floats = params range
  push = 5,           // i[0] = local step, i[1] = loss count, i[2] = stop request,
                      // i[3] = version computed on; x = loss sum; floats = gradient range
  reply = 6,          // i[0] = global step, i[1] = version, i[2] = flags, i[3] = loss count;
                      // x = loss sum; ints = gradients, staleness histogram; floats = params
  state_request = 7,  // (nothing)
  state = 8,          // i[0] = optimizer step; text = buffer names; floats = params range,
                      // then each buffer's range
  goodbye = 9,        // (nothing)
  pause = 10,         // (nothing): the worker stops pushing until its next pull
  challenge = 11,     // server -> worker, first on every connection: i[0] = server;
                      // text = the server's nonce (ps/ps_auth.h)
};
const char* to_string(MsgType t);

// Optimizer buffer names travel as one text, '\n'-separated.
std::string join_names(const std::vector<std::string>& names);
std::vector<std::string> split_names(const std::string& text);

// Reply flags (i[2] of a reply).
inline constexpr int64_t kFlagDone = 1;
inline constexpr int64_t kFlagStop = 2;
inline constexpr int64_t kFlagCheckpoint = 4;

struct Header {
  uint32_t magic = 0;
  uint32_t type = 0;
  int64_t i[4] = {0, 0, 0, 0};
  double x = 0.0;
  int64_t ints = 0;
  int64_t text = 0;
  int64_t floats = 0;
};
static_assert(sizeof(Header) == 72, "the header travels as raw bytes: no padding");

// A message as read: the header's fields with the ints and text; its floats are still in
// the socket (read_floats() puts them where they belong, without a copy).
struct Message {
  MsgType type{};
  int64_t i[4] = {0, 0, 0, 0};
  double x = 0.0;
  std::vector<int64_t> ints;
  std::string text;
  int64_t floats = 0;
};

class WireError : public std::runtime_error {
 public:
  enum class Kind { closed, timeout, io, protocol };
  WireError(Kind kind, const std::string& what) : std::runtime_error(what), kind_(kind) {}
  Kind kind() const { return kind_; }

 private:
  Kind kind_;
};

// A header's raw bytes, decoded and checked: the magic number, a known type, and counts
// within bounds (a corrupt or foreign header fails here instead of asking for an absurd
// allocation). Throws WireError (protocol) whose message starts with `peer`.
Header decode_header(std::span<const char, sizeof(Header)> bytes, const std::string& peer);
// A message's header, ints and text as they travel (its `floats` float values follow).
std::vector<char> encode_head(MsgType type, const int64_t (&i)[4], double x,
                              std::span<const int64_t> ints, const std::string& text,
                              int64_t floats);

// One end of a connection; owns the socket. `peer` names the other end in errors
// ("parameter server 1 (10.0.0.2:4001)", "worker 3").
class Connection {
 public:
  // Takes `fd` (blocking or not: every wait is a poll()).
  Connection(int fd, std::string peer);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  const std::string& peer() const { return peer_; }
  void set_peer(std::string peer) { peer_ = std::move(peer); }

  // Writes one message; `payload` is its floats, from several ranges in order.
  void send(MsgType type, const int64_t (&i)[4], double x, std::span<const int64_t> ints,
            const std::string& text, std::span<const std::span<const float>> payload,
            Deadline deadline);
  void send(MsgType type, Deadline deadline);  // no fields
  // Reads the next message's header, ints and text. `until` bounds the wait for its
  // first byte, `deadline` the rest (a peer may think for a long time between messages
  // but must send a message it started).
  Message receive(Deadline until, Deadline deadline);
  // The next n floats of the current message.
  void read_floats(float* dst, int64_t n, Deadline deadline);
  // Wakes any call blocked on this connection (from another thread); later calls fail.
  void shutdown();

  // Float payload bytes moved so far.
  int64_t payload_bytes_sent() const { return bytes_sent_; }
  int64_t payload_bytes_received() const { return bytes_received_; }

 private:
  void write_all(const void* data, size_t n, Deadline deadline);
  void read_exact(void* data, size_t n, Deadline deadline);
  [[noreturn]] void fail(WireError::Kind kind, const std::string& what) const;

  int fd_;
  std::string peer_;
  int64_t bytes_sent_ = 0;
  int64_t bytes_received_ = 0;
};

// A listening TCP socket on `bind_addr` (numeric or a name) and an ephemeral port.
// Throws WireError.
int listen_on(const std::string& bind_addr, int backlog, int* port);
// Accepts one connection, or returns -1 when none came before `deadline` (so the caller
// can check for other reasons to stop) or the process is out of descriptors (*out_of_fds
// is then set, when given). The socket is non-blocking. Throws WireError.
int accept_before(int listen_fd, Deadline deadline, bool* out_of_fds = nullptr);
// Connects to "host:port", retrying until `deadline` (the server may not listen yet).
// Throws WireError naming `peer`.
int connect_to(const std::string& address, Deadline deadline, const std::string& peer);

}  // namespace trainctl::ps::wire
