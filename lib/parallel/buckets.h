#pragma once
// Grouping of a flat gradient buffer into communication buckets for data parallelism.
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace trainctl::parallel {

// [begin, end) float offsets into a flat buffer.
using FloatRange = std::pair<int64_t, int64_t>;

// A run of consecutive layers (in backward order) whose ranges are adjacent in the flat
// buffer, so the bucket is one contiguous range.
struct Bucket {
  int64_t begin = 0;  // float offsets into the flat buffer
  int64_t end = 0;
  int first_layer = 0;  // indices into the backward-ordered layer list, inclusive
  int last_layer = 0;   // the bucket is complete once this (the lowest) layer is done
  int64_t size() const { return end - begin; }
};

struct BucketOptions {
  // A bucket is closed before it would exceed this many bytes (fp32), as PyTorch DDP's
  // bucket_cap_mb; a single layer larger than this gets a bucket of its own.
  size_t bucket_bytes = 25u << 20;
  // ... or once it holds this many layers, so that small models still get several
  // buckets and their communication starts while most of the backward pass remains.
  int max_layers_per_bucket = 2;
};

// `layers` lists each layer's range in the order the backward pass finishes them (last
// transformer block first, embeddings last). Each range must start where the next one
// ends (descending through the flat buffer); throws std::invalid_argument otherwise.
// Returns buckets in firing order.
std::vector<Bucket> plan_buckets(const std::vector<FloatRange>& layers,
                                 const BucketOptions& options);

}  // namespace trainctl::parallel
