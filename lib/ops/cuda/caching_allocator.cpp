#include "ops/cuda/caching_allocator.h"

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "cuda_abi/cuda_check.h"

namespace trainctl::ops::cuda {

CachingAllocator::CachingAllocator(int device) : device_(device) {}

CachingAllocator::~CachingAllocator() {
  // Destructors must not throw: errors while returning memory at teardown are ignored
  // (the process is usually exiting, and the driver reclaims everything anyway).
  for (auto& [size, p] : cached_) cudaFree(p);
  for (auto& [p, size] : live_) cudaFree(p);
}

size_t CachingAllocator::round_size(size_t bytes) {
  constexpr size_t kSmallStep = 512;
  constexpr size_t kLargeStep = size_t{2} << 20;
  if (bytes == 0) bytes = 1;
  if (bytes <= (size_t{1} << 20)) return (bytes + kSmallStep - 1) / kSmallStep * kSmallStep;
  return (bytes + kLargeStep - 1) / kLargeStep * kLargeStep;
}

void* CachingAllocator::driver_alloc(size_t bytes) {
  void* p = nullptr;
  cudaError_t e = cudaMallocManaged(&p, bytes, cudaMemAttachGlobal);
  if (e == cudaErrorMemoryAllocation && !cached_.empty()) {
    cudaGetLastError();  // clear the sticky-free error state before retrying
    release_cached();
    e = cudaMallocManaged(&p, bytes, cudaMemAttachGlobal);
  }
  if (e != cudaSuccess) {
    cudaGetLastError();
    throw std::runtime_error("cudaMallocManaged of " + std::to_string(bytes) + " bytes on GPU " +
                             std::to_string(device_) + " failed (" + std::to_string(in_use_) +
                             " bytes in use): " + cuda_abi::cuda_error_text(e));
  }
  cudaMemLocation where{};
  where.type = cudaMemLocationTypeDevice;
  where.id = device_;
  // A hint only: systems without it (no concurrent managed access) still work.
  if (cudaMemAdvise(p, bytes, cudaMemAdviseSetPreferredLocation, where) != cudaSuccess) {
    cudaGetLastError();
  }
  reserved_ += bytes;
  return p;
}

void CachingAllocator::release_cached() {
  for (auto& [size, p] : cached_) {
    TRAINCTL_CUDA_CHECK(cudaFree(p));
    reserved_ -= size;
  }
  cached_.clear();
}

void* CachingAllocator::allocate(size_t bytes) {
  const size_t size = round_size(bytes);
  void* p = nullptr;
  size_t got = size;
  // Best fit among cached blocks no more than twice the size (bounds the waste).
  auto it = cached_.lower_bound(size);
  if (it != cached_.end() && it->first <= 2 * size) {
    got = it->first;
    p = it->second;
    cached_.erase(it);
  } else {
    p = driver_alloc(size);
  }
  live_.emplace(p, got);
  in_use_ += got;
  if (in_use_ > peak_) peak_ = in_use_;
  return p;
}

void CachingAllocator::release(void* p) {
  if (p == nullptr) return;
  auto it = live_.find(p);
  if (it == live_.end()) {
    throw std::invalid_argument("CUDA backend: free() of a pointer it did not allocate");
  }
  in_use_ -= it->second;
  cached_.emplace(it->second, p);
  live_.erase(it);
}

}  // namespace trainctl::ops::cuda
