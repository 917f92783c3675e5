#include "data/blend_schedule.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "util/random.h"

namespace trainctl::data {

BlendSchedule::BlendSchedule(const std::vector<double>& weights, uint64_t seed) : seed_(seed) {
  double sum = 0;
  for (double w : weights) {
    if (!(w >= 0) || !std::isfinite(w)) throw std::invalid_argument("blend weight below 0");
    sum += w;
  }
  if (!(sum > 0)) throw std::invalid_argument("blend weights do not sum to a positive number");
  for (double w : weights) {
    w_.push_back(std::llround(w / sum * static_cast<double>(int64_t{1} << 30)));
    total_ += w_.back();
  }
  if (total_ <= 0) throw std::invalid_argument("blend weights round to 0");
  rebase(0, std::vector<uint64_t>(weights.size(), 0));
}

void BlendSchedule::rebase(uint64_t origin, const std::vector<uint64_t>& counts) {
  if (counts.size() != w_.size()) throw std::invalid_argument("one count per blend source");
  std::lock_guard lock(mutex_);
  origin_ = origin;
  State s;
  s.n = origin;
  s.count = counts;
  // Starting balances in [0, T) from the seed: where in its cycle each source begins.
  for (size_t k = 0; k < w_.size(); ++k) {
    s.balance.push_back(
        static_cast<int64_t>(rng::hash(seed_, 0xb1e4d, k) % static_cast<uint64_t>(total_)));
  }
  cursor_ = s;
  snapshots_.clear();
  snapshots_.push_back(std::move(s));
}

size_t BlendSchedule::next_source(const State& s) const {
  size_t best = 0;
  for (size_t k = 1; k < w_.size(); ++k) {
    if (s.balance[k] + w_[k] > s.balance[best] + w_[best]) best = k;
  }
  return best;
}

void BlendSchedule::step(State& s) const {
  const size_t k = next_source(s);
  for (size_t j = 0; j < w_.size(); ++j) s.balance[j] += w_[j];
  s.balance[k] -= total_;
  ++s.count[k];
  ++s.n;
  if ((s.n - origin_) % kSnapshotEvery == 0 &&
      (s.n - origin_) / kSnapshotEvery == snapshots_.size()) {
    snapshots_.push_back(s);
  }
}

const BlendSchedule::State& BlendSchedule::state_at(uint64_t n) const {
  if (n < origin_) {
    throw std::logic_error("blend sample " + std::to_string(n) + " precedes the resumed stream (" +
                           std::to_string(origin_) + ")");
  }
  if (n < cursor_.n) {
    const uint64_t i = std::min<uint64_t>((n - origin_) / kSnapshotEvery, snapshots_.size() - 1);
    cursor_ = snapshots_[static_cast<size_t>(i)];
  } else if (snapshots_.back().n > cursor_.n && snapshots_.back().n <= n) {
    cursor_ = snapshots_.back();
  }
  while (cursor_.n < n) step(cursor_);
  return cursor_;
}

BlendSchedule::Pick BlendSchedule::pick(uint64_t g) const {
  std::lock_guard lock(mutex_);
  const State& s = state_at(g);
  const size_t k = next_source(s);
  return {k, s.count[k]};
}

std::vector<uint64_t> BlendSchedule::counts_before(uint64_t n) const {
  std::lock_guard lock(mutex_);
  return state_at(n).count;
}

}  // namespace trainctl::data
