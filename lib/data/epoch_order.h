#pragma once
// Epochs over a split of N sequences, as a pure function of the sample index (no shuffle
// state to save or restore): sample i belongs to epoch i / N and is sequence
// permute(i % N) of that epoch, where the permutation is a keyed bijection of [0, N)
// derived from (seed, split, epoch). Every sequence is seen exactly once per epoch, each
// epoch in a new order, and sample i is the same on every layout and after any resume,
// also across an epoch boundary.
#include <cstdint>

namespace trainctl::data {

struct EpochSample {
  uint64_t epoch = 0;
  uint64_t sequence = 0;  // in [0, N)
};

// A bijection of [0, n) keyed by `key` (a 4-round Feistel network over the smallest even
// number of bits that covers n, walking cycles back into range); n >= 1.
uint64_t keyed_permutation(uint64_t x, uint64_t n, uint64_t key);

// Sample `index` of a split of `sequences` sequences (>= 1), shuffled per epoch with a key
// from (seed, stream, epoch).
EpochSample epoch_sample(uint64_t index, uint64_t sequences, uint64_t seed, uint64_t stream);

}  // namespace trainctl::data
