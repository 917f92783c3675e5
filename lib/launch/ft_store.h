#pragma once
// The fault-tolerance protocol (ft_quorum.h) over the rendezvous store, and the heartbeat
// a replica's leader keeps while it runs.
#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "launch/ft_quorum.h"
#include "launch/tcp_store_client.h"

namespace trainctl::launch {

// QuorumStore on a TcpStoreClient, every key under `prefix` (the attempt's).
class TcpQuorumStore final : public QuorumStore {
 public:
  TcpQuorumStore(std::shared_ptr<TcpStoreClient> client, std::string prefix);
  void set(const std::string& key, const std::string& value) override;
  std::optional<std::string> try_get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  std::optional<std::string> wait_get(const std::string& key,
                                      std::chrono::milliseconds timeout) override;

 private:
  std::shared_ptr<TcpStoreClient> client_;
  std::string prefix_;
};

// Bumps heartbeat_key(replica, generation, rank) every `interval` on a thread of its own (with
// a store connection of its own) until destroyed. Store errors are ignored: a lost store
// is noticed by the protocol's own calls.
class ReplicaHeartbeat {
 public:
  ReplicaHeartbeat(std::unique_ptr<QuorumStore> store, int replica, int generation, int rank,
                   std::chrono::milliseconds interval = std::chrono::milliseconds(250));
  ~ReplicaHeartbeat();
  ReplicaHeartbeat(const ReplicaHeartbeat&) = delete;
  ReplicaHeartbeat& operator=(const ReplicaHeartbeat&) = delete;

 private:
  std::unique_ptr<QuorumStore> store_;
  std::string key_;
  std::chrono::milliseconds interval_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace trainctl::launch
