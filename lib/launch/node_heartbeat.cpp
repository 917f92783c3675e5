#include "launch/node_heartbeat.h"

#include "util/error.h"

namespace trainctl::launch {

NodeHeartbeats::NodeHeartbeats(TcpStoreClient& store, std::string prefix, int node, int nnodes)
    : store_(store), prefix_(std::move(prefix)), node_(node), nnodes_(nnodes) {}

void NodeHeartbeats::beat() {
  const auto now = std::chrono::steady_clock::now();
  if (now - last_beat_ < interval) return;
  last_beat_ = now;
  try {
    store_.add(prefix_ + std::to_string(node_), 1);
  } catch (const RendezvousError&) {
  }
}

void NodeHeartbeats::done() {
  try {
    store_.set_string(prefix_ + std::to_string(node_) + ".done", "1");
  } catch (const RendezvousError&) {
  }
}

std::vector<int64_t> NodeHeartbeats::sample() {
  std::vector<int64_t> out(static_cast<size_t>(nnodes_), -1);
  for (int n = 0; n < nnodes_; ++n) {
    if (n == node_) continue;
    try {
      const std::string key = prefix_ + std::to_string(n);
      if (store_.check({key + ".done"})) continue;
      out[static_cast<size_t>(n)] = store_.add(key, 0);
    } catch (const RendezvousError&) {
    }
  }
  return out;
}

std::vector<int> NodeHeartbeats::silent_between(const std::vector<int64_t>& before,
                                                const std::vector<int64_t>& after) const {
  std::vector<int> silent;
  for (int n = 0; n < nnodes_ && static_cast<size_t>(n) < before.size() &&
                  static_cast<size_t>(n) < after.size();
       ++n) {
    const auto i = static_cast<size_t>(n);
    if (n != node_ && before[i] >= 0 && after[i] == before[i]) silent.push_back(n);
  }
  return silent;
}

void NodeHeartbeats::watch(std::chrono::steady_clock::time_point now) {
  const std::vector<int64_t> now_values = sample();
  // -2: no sample yet, so the first one counts as a change for every node.
  watched_.resize(now_values.size(), -2);
  unchanged_since_.resize(now_values.size(), now);
  for (size_t i = 0; i < now_values.size(); ++i) {
    if (now_values[i] < 0 || now_values[i] != watched_[i]) unchanged_since_[i] = now;
    watched_[i] = now_values[i];
  }
  last_watch_ = now;
}

std::vector<int> NodeHeartbeats::silent_for(std::chrono::milliseconds limit) const {
  std::vector<int> silent;
  for (size_t i = 0; i < watched_.size(); ++i) {
    if (watched_[i] >= 0 && last_watch_ - unchanged_since_[i] >= limit) {
      silent.push_back(static_cast<int>(i));
    }
  }
  return silent;
}

}  // namespace trainctl::launch
