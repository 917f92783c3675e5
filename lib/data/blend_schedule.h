#pragma once
// Which source each global training sample of a blend comes from. A deterministic weighted
// round-robin over the global sample index (the "largest deficit" rule Megatron's
// BlendedDataset uses, in integer arithmetic): before sample n every source k earns its
// integer weight W_k (the weights scaled to sum to 2^30), the source with the largest
// balance is picked (the lowest index on a tie) and pays the total T = sum W_k. Balances
// stay within a few T, so after n samples source k has drawn n*w_k samples within a small
// constant, at every prefix: the mix holds inside every global batch, not only on average.
// The seed sets the starting balances, so two seeds interleave the sources differently.
//
// The schedule is a function of the sample index alone: the same on any number of workers
// and layouts. Looking up a sample walks forward from the nearest of the snapshots kept
// every kSnapshotEvery samples (the trainer asks for increasing indices, so the walk is
// short). Thread-safe (the prefetcher samples on its own thread).
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace trainctl::data {

class BlendSchedule {
 public:
  // Weights >= 0 with a positive sum (checked at validate; std::invalid_argument here).
  BlendSchedule(const std::vector<double>& weights, uint64_t seed);

  struct Pick {
    size_t source = 0;
    uint64_t index = 0;  // the sample's index within its source
  };
  // Global sample g (g >= origin(), see rebase).
  Pick pick(uint64_t g) const;
  // How many of the samples [origin, n) each source gave, plus its count at origin.
  std::vector<uint64_t> counts_before(uint64_t n) const;

  // Continue from a checkpoint taken with other weights: from sample `origin` on, source k
  // continues at its recorded count counts[k], and the new weights share the samples from
  // there (balances start afresh).
  void rebase(uint64_t origin, const std::vector<uint64_t>& counts);
  uint64_t origin() const { return origin_; }

  static constexpr uint64_t kSnapshotEvery = 4096;

 private:
  struct State {
    uint64_t n = 0;
    std::vector<int64_t> balance;
    std::vector<uint64_t> count;
  };
  size_t next_source(const State& s) const;
  void step(State& s) const;
  const State& state_at(uint64_t n) const;  // under mutex_

  std::vector<int64_t> w_;
  int64_t total_ = 0;
  uint64_t seed_ = 0;
  uint64_t origin_ = 0;
  mutable std::mutex mutex_;
  mutable State cursor_;
  mutable std::vector<State> snapshots_;  // snapshots_[i].n == origin_ + i * kSnapshotEvery
};

}  // namespace trainctl::data
