#pragma once
// The rendezvous store: a small TCP key-value server that node 0's launcher runs on a
// background thread (like torchrun's TCPStore). Workers and launchers on every node reach
// it through TcpStoreClient. Keys are write-many, values are bytes; `add` keeps a counter
// as a decimal string. The server holds state only in memory: one server per launch.
//
// Only clients whose first message is the job token are served; others get a
// "rejected" byte and are disconnected. Clients that say nothing are dropped after a
// few seconds, so a port scanner cannot hold a slot.
#include <memory>
#include <string>

namespace trainctl::launch {

class TcpStoreServer {
 public:
  // Listens on bind_addr:port (port 0 picks a free port; see port()) and starts serving.
  // Throws RendezvousError when the port cannot be bound (in use, no permission).
  TcpStoreServer(std::string token, int port, const std::string& bind_addr = "0.0.0.0");
  ~TcpStoreServer();  // stops serving and joins the thread
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  int port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Compares two secrets in time that depends only on their lengths (not on where they
// first differ), so response timing does not leak the token byte by byte.
bool constant_time_equal(const std::string& a, const std::string& b);

}  // namespace trainctl::launch
