#pragma once
// Bytes a tensor allocator has handed out and not yet taken back, and the most it ever
// had out at once. One counter belongs to one allocator (a backend owns its own, so the
// engine that owns the backend owns the count: no process-wide state). Thread-safe: the
// training thread and the communication thread may allocate at the same time.
#include <cstddef>
#include <mutex>
#include <unordered_map>

namespace trainctl {

class AllocationCounter {
 public:
  // Records `bytes` handed out at `p` (p must not be live already).
  void allocated(const void* p, size_t bytes);
  // Records `p` taken back; returns its bytes (0 for null or a pointer never recorded).
  size_t freed(const void* p);

  size_t in_use_bytes() const;
  size_t peak_bytes() const;  // max of in_use_bytes() since construction

 private:
  mutable std::mutex mu_;
  std::unordered_map<const void*, size_t> live_;
  size_t in_use_ = 0;
  size_t peak_ = 0;
};

}  // namespace trainctl
