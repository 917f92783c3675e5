#include "ps/update_grouping.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace trainctl::ps {

namespace {
// Weight of the newest interval in the average: a few steps' memory, so a worker that
// changes pace (another job on its core) is followed within a handful of steps.
constexpr double kNewest = 0.25;
// Workers up to this many times slower than the fastest are its peers (waited for). The
// slowdown where asynchrony starts to pay: a 1.2x-slower peer costs the others 0.2 of a
// step per update when waited for, against stale gradients when not.
constexpr double kPeerRatio = 1.5;
}  // namespace

UpdateGrouping::UpdateGrouping(int workers, double window)
    : window_(window),
      average_(static_cast<size_t>(std::max(workers, 0)), 0.0),
      started_(average_.size(), -1.0) {
  if (workers < 1) throw std::invalid_argument("update grouping: needs at least one worker");
  if (!(window >= 0.0)) throw std::invalid_argument("update grouping: window must be >= 0");
}

void UpdateGrouping::sent(int w, double t) { started_.at(static_cast<size_t>(w)) = t; }

void UpdateGrouping::arrived(int w, double t) {
  const auto i = static_cast<size_t>(w);
  const double start = started_.at(i);
  started_[i] = -1.0;
  if (start < 0.0 || t < start) return;
  const double took = t - start;
  average_[i] = average_[i] > 0.0 ? (1.0 - kNewest) * average_[i] + kNewest * took : took;
}

void UpdateGrouping::paused(int w) { started_.at(static_cast<size_t>(w)) = -1.0; }

std::optional<double> UpdateGrouping::hold_until(std::span<const int> computing,
                                                 double first_arrival, double now) const {
  if (computing.empty() || window_ <= 0.0) return std::nullopt;
  double fastest = 0.0;
  for (double a : average_) {
    if (a > 0.0) fastest = fastest > 0.0 ? std::min(fastest, a) : a;
  }
  if (fastest <= 0.0) return std::nullopt;
  const double deadline = first_arrival + window_ * fastest;
  if (now >= deadline) return std::nullopt;
  for (int w : computing) {
    const auto i = static_cast<size_t>(w);
    if (started_.at(i) < 0.0) continue;  // not computing on anything sent
    // Without an average yet (its first step) a worker counts as a peer, so the very
    // first steps, when the loss moves most, are grouped too.
    const double average = average_[i] > 0.0 ? average_[i] : fastest;
    if (average <= kPeerRatio * fastest) return deadline;
  }
  return std::nullopt;
}

}  // namespace trainctl::ps
