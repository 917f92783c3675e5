#include "parallel/buckets.h"

#include <stdexcept>
#include <string>

namespace trainctl::parallel {

std::vector<Bucket> plan_buckets(const std::vector<FloatRange>& layers,
                                 const BucketOptions& options) {
  if (options.max_layers_per_bucket < 1) {
    throw std::invalid_argument("max_layers_per_bucket must be at least 1, got " +
                                std::to_string(options.max_layers_per_bucket));
  }
  for (size_t i = 0; i < layers.size(); ++i) {
    const auto [begin, end] = layers[i];
    if (begin < 0 || end < begin) {
      throw std::invalid_argument("gradient layer " + std::to_string(i) +
                                  " has an invalid range [" + std::to_string(begin) + ", " +
                                  std::to_string(end) + ")");
    }
    if (i > 0 && end != layers[i - 1].first) {
      throw std::invalid_argument(
          "gradient layers must be listed in backward order with adjacent ranges: layer " +
          std::to_string(i) + " ends at " + std::to_string(end) + " but layer " +
          std::to_string(i - 1) + " begins at " + std::to_string(layers[i - 1].first));
    }
  }
  const auto cap_floats = static_cast<int64_t>(options.bucket_bytes / sizeof(float));
  std::vector<Bucket> buckets;
  for (size_t i = 0; i < layers.size(); ++i) {
    const auto [begin, end] = layers[i];
    const bool start_new = buckets.empty() ||
                           buckets.back().last_layer - buckets.back().first_layer + 1 >=
                               options.max_layers_per_bucket ||
                           buckets.back().size() + (end - begin) > cap_floats;
    if (start_new) {
      buckets.push_back({begin, end, static_cast<int>(i), static_cast<int>(i)});
    } else {
      buckets.back().begin = begin;  // layers descend through the buffer
      buckets.back().last_layer = static_cast<int>(i);
    }
  }
  return buckets;
}

}  // namespace trainctl::parallel
