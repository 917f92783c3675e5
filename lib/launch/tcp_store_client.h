#pragma once
// Client of the rendezvous store (TcpStoreServer). It is a gloo::rendezvous::Store, so
// Gloo contexts rendezvous through it directly (wrap it in a gloo PrefixStore per
// restart and per sub-group), plus the counters and probes the launchers use.
//
// Every call has a deadline: connecting retries with backoff until the connect timeout
// (node 0 may start later than the others), and get/wait give up after their timeout.
// Failures raise RendezvousError with the store's address and what to do.
#include <gloo/rendezvous/store.h>

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "util/error.h"

namespace trainctl::launch {

// The store refused this client's job token. Distinct so a caller that read the token
// from a file that may still hold a previous run's token can re-read it and retry.
class TokenRejectedError : public RendezvousError {
 public:
  using RendezvousError::RendezvousError;
};

struct StoreClientOptions {
  // How long to keep retrying the first connection.
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(60)};
  // Default for get/wait and the limit for any single request.
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
};

class TcpStoreClient : public gloo::rendezvous::Store {
 public:
  // Connects and presents the token. Throws TokenRejectedError when the store refuses
  // the token, RendezvousError when it cannot be reached before the connect timeout.
  TcpStoreClient(std::string host, int port, std::string token, StoreClientOptions options = {});
  ~TcpStoreClient() override;
  TcpStoreClient(const TcpStoreClient&) = delete;
  TcpStoreClient& operator=(const TcpStoreClient&) = delete;

  void set(const std::string& key, const std::vector<char>& data) override;
  // Blocks until the key exists (up to the default timeout).
  std::vector<char> get(const std::string& key) override;
  std::vector<char> get(const std::string& key, std::chrono::milliseconds timeout);
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

  // Atomically adds delta to the integer stored at key (absent = 0); returns the sum.
  int64_t add(const std::string& key, int64_t delta);
  // True when every key exists; never blocks on the keys.
  bool check(const std::vector<std::string>& keys);

  // Convenience for text values.
  void set_string(const std::string& key, const std::string& value);
  std::string get_string(const std::string& key, std::chrono::milliseconds timeout);

  // "host:port", for messages.
  const std::string& address() const { return address_; }

 private:
  // Sends one request and reads its status byte; RendezvousError on a broken connection.
  uint8_t roundtrip(const std::string& request, std::chrono::milliseconds reply_within);
  void read(void* out, size_t n, std::chrono::milliseconds within);
  [[noreturn]] void fail(const std::string& what) const;

  std::string address_;
  StoreClientOptions options_;
  std::mutex mu_;  // one request at a time on the connection
  int fd_ = -1;
};

// True when something accepts TCP connections at host:port within `within` (nothing is
// sent: no token is needed, and the store just sees a connection close).
bool store_reachable(const std::string& host, int port, std::chrono::milliseconds within);

}  // namespace trainctl::launch
