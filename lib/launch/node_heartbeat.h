#pragma once
// Launchers' heartbeats through the rendezvous store, so that when a node's launcher is
// killed (or its host goes down) the other nodes can say which node it was, instead of
// only "connection closed by peer" from a worker's log, or nothing at all while the
// workers here wait for peers that will never answer. Each launcher bumps its own counter
// while it runs; a node whose counter stands still over a window is gone.
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

  // Watching over time: call watch() on every poll (it samples, taking `now` as the
  // sample's time); silent_for() names the nodes whose counter has not moved for at least
  // `limit` between two samples. Both ends are samples, so a stall of this process alone
  // (a loaded machine) never makes a live node silent: its counter moved meanwhile. A node
  // that is done, or whose counter cannot be read, is never silent; a node that has not
  // beaten once since the watch began is, after `limit` (killed before its first beat).
  void watch(std::chrono::steady_clock::time_point now);
  std::vector<int> silent_for(std::chrono::milliseconds limit) const;

 private:
  TcpStoreClient& store_;
  std::string prefix_;
  int node_;
  int nnodes_;
  std::chrono::steady_clock::time_point last_beat_{};
  // watch(): each node's counter at the last sample, and the first sample that saw it.
  std::vector<int64_t> watched_;
  std::vector<std::chrono::steady_clock::time_point> unchanged_since_;
  std::chrono::steady_clock::time_point last_watch_{};
};

}  // namespace trainctl::launch
