#pragma once
// Launchers' heartbeats through the rendezvous store, so that when a node's launcher is
// killed (or its host goes down) the other nodes can say which node it was, instead of
// only "connection closed by peer" from a worker's log. Each launcher bumps its own
// counter while it runs; a node whose counter stands still over a window is gone.
#include <chrono>
#include <string>
#include <vector>

#include "launch/tcp_store_client.h"

namespace trainctl::launch {

class NodeHeartbeats {
 public:
  // Keys: <prefix><node> for each node in [0, nnodes).
  NodeHeartbeats(TcpStoreClient& store, std::string prefix, int node, int nnodes);

  // Bumps this node's counter, at most once per `interval` (callers may call it on every
  // loop iteration). Store errors are ignored: losing the store is noticed elsewhere.
  void beat();
  static constexpr std::chrono::milliseconds interval{250};

  // This node's launcher is leaving after its workers succeeded: it will beat no more,
  // and that is not a failure.
  void done();

  // Every other node's counter now (-1 where it cannot be read or the node is done).
  std::vector<int64_t> sample();
  // The nodes whose counter did not move between two samples taken several intervals
  // apart.
  std::vector<int> silent_between(const std::vector<int64_t>& before,
                                  const std::vector<int64_t>& after) const;

 private:
  TcpStoreClient& store_;
  std::string prefix_;
  int node_;
  int nnodes_;
  std::chrono::steady_clock::time_point last_beat_{};
};

}  // namespace trainctl::launch
