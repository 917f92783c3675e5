#pragma once
// How a flat buffer is split into one contiguous shard per data-parallel rank (ZeRO).
#include <algorithm>
#include <cstdint>

namespace trainctl::parallel {

struct ShardLayout {
  int64_t total = 0;  // floats in the flat buffer
  int ranks = 1;
  int64_t shard_size = 0;  // floats per rank after padding: ranks * shard_size >= total

  // Rank r owns [begin(r), end(r)) of the buffer; the last shards may be short (or empty)
  // where the padding falls.
  int64_t begin(int r) const { return std::min<int64_t>(r * shard_size, total); }
  int64_t end(int r) const { return std::min<int64_t>((r + 1) * shard_size, total); }
  int64_t padded_total() const { return shard_size * ranks; }
  bool padded() const { return padded_total() != total; }
};

// Shards of ceil(total / ranks) floats rounded up to whole 64-byte lines (16 floats), so
// every shard starts aligned, like the parameters inside the buffer, and vectorised
// kernels split each parameter at the same points as an unsharded update would.
inline ShardLayout make_shard_layout(int64_t total, int ranks) {
  constexpr int64_t kAlign = 16;
  const int64_t per_rank = (total + ranks - 1) / ranks;
  return {total, ranks, (per_rank + kAlign - 1) / kAlign * kAlign};
}

}  // namespace trainctl::parallel
