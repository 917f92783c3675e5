#pragma once
// Just enough of CUDA to run this project's warp-level kernels on the host (see run.sh):
// each warp runs as 32 std::threads, __shfl_xor_sync exchanges values through a per-warp
// slot array between two barriers, and warps run one after another. Only for kernels that
// synchronise within a warp (no __syncthreads, no shared memory): the attention and Llama
// kernels. Slow (a thread per lane) and for checking indexing, not for speed.
#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __host__
using std::max;
using std::min;

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
using cudaStream_t = void*;

inline thread_local dim3 threadIdx, blockIdx;
inline dim3 blockDim, gridDim;

struct EmulatedWarp {
  std::barrier<> barrier{32};
  double slots[32];
};
inline thread_local EmulatedWarp* emulated_warp = nullptr;

template <class T>
T __shfl_xor_sync(unsigned, T v, int lane_mask) {
  static_assert(sizeof(T) <= sizeof(double));
  const unsigned lane = threadIdx.x % 32;
  std::memcpy(&emulated_warp->slots[lane], &v, sizeof v);
  emulated_warp->barrier.arrive_and_wait();
  T r;
  std::memcpy(&r, &emulated_warp->slots[lane ^ static_cast<unsigned>(lane_mask)], sizeof r);
  emulated_warp->barrier.arrive_and_wait();
  return r;
}

// Block-wide synchronisation cannot be emulated with warps run one at a time: a kernel that
// reaches it stops the check (device_reduce.cuh's block reductions need it to compile).
inline void __syncthreads() { std::abort(); }

// kernel<<<grid, block, 0, stream>>>(args...) becomes emulated_launch(grid, block, kernel,
// args...) (run.sh rewrites the launches).
template <class F, class... A>
void emulated_launch(dim3 grid, dim3 block, F kernel, A... args) {
  if (block.x % 32 != 0 || block.y != 1 || block.z != 1) std::abort();  // whole 1-D warps only
  gridDim = grid;
  blockDim = block;
  for (unsigned by = 0; by < grid.y; ++by) {
    for (unsigned bx = 0; bx < grid.x; ++bx) {
      for (unsigned w = 0; w < block.x / 32; ++w) {
        EmulatedWarp warp;
        std::vector<std::thread> lanes;
        for (unsigned lane = 0; lane < 32; ++lane) {
          lanes.emplace_back([&, lane] {
            blockIdx = dim3(bx, by);
            threadIdx = dim3(w * 32 + lane);
            emulated_warp = &warp;
            kernel(args...);
          });
        }
        for (std::thread& t : lanes) t.join();
      }
    }
  }
}
