#include "data/epoch_order.h"

#include "util/random.h"

namespace trainctl::data {

uint64_t keyed_permutation(uint64_t x, uint64_t n, uint64_t key) {
  if (n <= 1) return 0;
  int bits = 2;
  while (bits < 64 && (uint64_t{1} << bits) < n) bits += 2;
  const int half = bits / 2;
  const uint64_t mask = (uint64_t{1} << half) - 1;
  // Cycle walking: the network permutes [0, 2^bits); applying it again to a value outside
  // [0, n) until one lands inside gives a permutation of [0, n). 2^bits < 4n, so fewer than
  // four applications are needed on average.
  do {
    uint64_t left = x >> half, right = x & mask;
    for (uint64_t round = 0; round < 4; ++round) {
      const uint64_t f = rng::hash(key, round, right) & mask;
      const uint64_t next = left ^ f;
      left = right;
      right = next;
    }
    x = (left << half) | right;
  } while (x >= n);
  return x;
}

EpochSample epoch_sample(uint64_t index, uint64_t sequences, uint64_t seed, uint64_t stream) {
  EpochSample s;
  s.epoch = index / sequences;
  s.sequence = keyed_permutation(index % sequences, sequences, rng::hash(seed, stream, s.epoch));
  return s;
}

}  // namespace trainctl::data
