// Token + position embeddings. The backward gives each thread one column and walks the
// rows in order: no two threads touch the same float and the summation order is fixed, so
// repeated tokens accumulate deterministically without atomics.
#include "cuda_abi/cuda_check.h"
#include "ops/cuda/device_reduce.cuh"
#include "ops/cuda/kernels.h"

namespace trainctl::ops::cuda {

namespace {

constexpr int kThreads = 256;

__device__ inline bool holds(const VocabRange& v, int32_t token) {
  return token >= v.begin && token < v.begin + v.count;
}

__global__ void embedding_forward_kernel(float* out, const int32_t* tokens, const float* wte,
                                         VocabRange vocab, const float* wpe, int64_t rows, int T,
                                         int C) {
  const size_t n = static_cast<size_t>(rows) * C;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const int64_t r = static_cast<int64_t>(i / C);
    const int c = static_cast<int>(i % C);
    const int32_t tok = tokens[r];
    float v = holds(vocab, tok) ? wte[static_cast<int64_t>(tok - vocab.begin) * C + c] : 0.0f;
    if (wpe != nullptr) v += wpe[(r % T) * C + c];
    out[i] = v;
  }
}

// __restrict__: the loads of the next rows' token and gradient need not wait for this
// row's store (the walk is latency-bound: one thread per column).
__global__ void embedding_dwte_kernel(float* __restrict__ dwte, const float* __restrict__ dout,
                                      const int32_t* __restrict__ tokens, VocabRange vocab,
                                      int64_t rows, int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t tok = tokens[r];
    if (holds(vocab, tok)) dwte[static_cast<int64_t>(tok - vocab.begin) * C + c] += dout[r * C + c];
  }
}

// dwpe[t, c] += sum over b of dout[b, t, c]: one thread per (t, c).
__global__ void embedding_dwpe_kernel(float* dwpe, const float* dout, int B, int T, int C) {
  const size_t n = static_cast<size_t>(T) * C;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    float s = 0.0f;
    for (int b = 0; b < B; ++b) s += dout[static_cast<size_t>(b) * n + i];
    dwpe[i] += s;
  }
}

}  // namespace

void launch_embedding_forward(cudaStream_t s, float* out, const int32_t* tokens, const float* wte,
                              VocabRange vocab, const float* wpe, int B, int T, int C) {
  const int64_t rows = static_cast<int64_t>(B) * T;
  const size_t n = static_cast<size_t>(rows) * C;
  if (n == 0) return;
  embedding_forward_kernel<<<grid_for(n, kThreads), kThreads, 0, s>>>(out, tokens, wte, vocab, wpe,
                                                                      rows, T, C);
  TRAINCTL_CUDA_CHECK_LAUNCH(embedding_forward_kernel);
}

void launch_embedding_backward(cudaStream_t s, float* dwte, float* dwpe, const float* dout,
                               const int32_t* tokens, VocabRange vocab, int B, int T, int C) {
  const int64_t rows = static_cast<int64_t>(B) * T;
  if (rows == 0 || C <= 0) return;
  embedding_dwte_kernel<<<(C + 127) / 128, 128, 0, s>>>(dwte, dout, tokens, vocab, rows, C);
  TRAINCTL_CUDA_CHECK_LAUNCH(embedding_dwte_kernel);
  if (dwpe != nullptr) {
    const size_t n = static_cast<size_t>(T) * C;
    embedding_dwpe_kernel<<<grid_for(n, kThreads), kThreads, 0, s>>>(dwpe, dout, B, T, C);
    TRAINCTL_CUDA_CHECK_LAUNCH(embedding_dwpe_kernel);
  }
}

}  // namespace trainctl::ops::cuda
