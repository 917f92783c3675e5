#pragma once
// The rendezvous store's wire format and the socket helpers both ends share. Internal to
// launch/: users see TcpStoreServer and TcpStoreClient.
//
// A connection starts with the client's hello: u32 length + the job token; the server
// answers one status byte (ok, or rejected and then closes). Then each request is
// [u8 op][fields] and each reply [u8 status][fields]. Strings are u32 length + bytes;
// integers are little-endian (the byte order of every machine trainctl runs on).
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace trainctl::launch::wire {

using Clock = std::chrono::steady_clock;

enum class Op : uint8_t {
  set = 1,    // key, value                       -> ok
  get = 2,    // key, u64 timeout_ms              -> ok + value | timeout
  wait = 3,   // u32 n, n keys, u64 timeout_ms    -> ok | timeout
  add = 4,    // key, i64 delta                   -> ok + i64 new value
  check = 5,  // u32 n, n keys                    -> ok + u8 (all present)
};

enum class Status : uint8_t { rejected = 0, ok = 1, timeout = 2 };

// Longest token a client may present before it is authenticated, and longest key or
// value afterwards: bounds what an unauthenticated or broken peer can make us allocate.
inline constexpr uint32_t kMaxTokenBytes = 4096;
inline constexpr uint32_t kMaxFieldBytes = 256u << 20;

class Writer {
 public:
  void u8(uint8_t v) { buf_.push_back(static_cast<char>(v)); }
  void u32(uint32_t v) { raw(&v, sizeof v); }
  void u64(uint64_t v) { raw(&v, sizeof v); }
  void i64(int64_t v) { raw(&v, sizeof v); }
  void str(std::string_view s) {
    u32(static_cast<uint32_t>(s.size()));
    buf_.append(s);
  }
  const std::string& bytes() const { return buf_; }

 private:
  void raw(const void* p, size_t n) { buf_.append(static_cast<const char*>(p), n); }
  std::string buf_;
};

// Reads fields from a buffer that may hold an incomplete message: each call returns false
// (and consumes nothing useful) when the buffer ends early, so the caller waits for more.
class Reader {
 public:
  explicit Reader(std::string_view buf) : buf_(buf) {}
  bool u8(uint8_t& v) { return raw(&v, sizeof v); }
  bool u32(uint32_t& v) { return raw(&v, sizeof v); }
  bool u64(uint64_t& v) { return raw(&v, sizeof v); }
  bool i64(int64_t& v) { return raw(&v, sizeof v); }
  // Throws FieldTooLarge when the announced length exceeds `max`.
  bool str(std::string& s, uint32_t max);
  size_t consumed() const { return off_; }

 private:
  bool raw(void* p, size_t n);
  std::string_view buf_;
  size_t off_ = 0;
};

struct FieldTooLarge : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A socket call failed. `timed_out` distinguishes a deadline from a closed or broken peer.
struct SocketError : std::runtime_error {
  SocketError(const std::string& what, bool timed_out_)
      : std::runtime_error(what), timed_out(timed_out_) {}
  bool timed_out;
};

// One connection attempt to host:port that gives up at `deadline` (non-blocking connect).
// Returns a blocking, close-on-exec socket with TCP_NODELAY. Throws SocketError.
int connect_once(const std::string& host, int port, Clock::time_point deadline);
void send_all(int fd, std::string_view data, Clock::time_point deadline);
void recv_exact(int fd, void* out, size_t n, Clock::time_point deadline);

}  // namespace trainctl::launch::wire
