#pragma once
// Device memory for one GPU, cached: freed blocks are kept and handed out again for
// requests of about the same size, so the model's many buffers (and any repeated
// alloc/free) cost the driver one allocation each, once.
//
// Blocks are CUDA managed memory preferring the GPU: kernels run on device-resident pages,
// and host code that reads or writes backend buffers (parameter initialisation, losses,
// checkpoints) still works, migrating the pages it touches. Not thread-safe: one backend
// is driven by one thread (ops/backend.h).
#include <cstddef>
#include <map>
#include <unordered_map>

namespace trainctl::ops::cuda {

class CachingAllocator {
 public:
  explicit CachingAllocator(int device);
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // At least `bytes` (256-byte aligned); contents undefined. Throws std::runtime_error
  // (with the CUDA error and the sizes involved) when the device is out of memory even
  // after returning every cached block to the driver.
  void* allocate(size_t bytes);
  // Takes back a pointer from allocate(); null is ignored. Throws std::invalid_argument for
  // a pointer this allocator did not hand out.
  void release(void* p);

  size_t in_use_bytes() const { return in_use_; }
  size_t peak_bytes() const { return peak_; }          // max of in_use_bytes() over time
  size_t reserved_bytes() const { return reserved_; }  // held from the driver, in use or cached

  // Block sizes handed out for a request (exposed for tests): 512-byte steps up to 1 MiB,
  // 2 MiB steps above.
  static size_t round_size(size_t bytes);

 private:
  void* driver_alloc(size_t bytes);
  void release_cached();

  int device_;
  std::multimap<size_t, void*> cached_;     // free blocks by size
  std::unordered_map<void*, size_t> live_;  // handed-out blocks and their sizes
  size_t in_use_ = 0;
  size_t peak_ = 0;
  size_t reserved_ = 0;
};

}  // namespace trainctl::ops::cuda
