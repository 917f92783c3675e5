#include "tensor/allocation_counter.h"

#include <algorithm>

namespace trainctl {

void AllocationCounter::allocated(const void* p, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  live_[p] = bytes;
  in_use_ += bytes;
  peak_ = std::max(peak_, in_use_);
}

size_t AllocationCounter::freed(const void* p) {
  if (p == nullptr) return 0;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(p);
  if (it == live_.end()) return 0;
  const size_t bytes = it->second;
  in_use_ -= bytes;
  live_.erase(it);
  return bytes;
}

size_t AllocationCounter::in_use_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return in_use_;
}

size_t AllocationCounter::peak_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return peak_;
}

}  // namespace trainctl
