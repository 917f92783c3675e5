// Softmax cross-entropy over rows of logits: one block per row (vocabularies are wide).
#include "cuda_abi/cuda_check.h"
#include "ops/cuda/device_reduce.cuh"
#include "ops/cuda/kernels.h"

namespace trainctl::ops::cuda {

namespace {

constexpr int kThreads = 256;

__device__ inline bool holds(const VocabRange& v, int32_t token) {
  return token >= v.begin && token < v.begin + v.count;
}

__global__ void softmax_xent_rows_kernel(float* losses, float* logits, const int32_t* targets,
                                         int V, bool backward, float dloss, int* bad_row) {
  __shared__ float shared[32];
  const int row = blockIdx.x;
  float* l = logits + static_cast<size_t>(row) * V;
  const int32_t target = targets[row];
  if (target >= V) {
    if (threadIdx.x == 0) atomicExch(bad_row, row);
    return;
  }
  if (target < 0) {  // ignored position: no loss, no gradient
    if (threadIdx.x == 0) losses[row] = 0.0f;
    if (backward) {
      for (int j = threadIdx.x; j < V; j += blockDim.x) l[j] = 0.0f;
    }
    return;
  }
  const float target_logit = l[target];  // read by all threads before anyone overwrites it
  float m = -INFINITY;
  for (int j = threadIdx.x; j < V; j += blockDim.x) m = fmaxf(m, l[j]);
  m = block_max(m, shared);
  float sum = 0.0f;
  for (int j = threadIdx.x; j < V; j += blockDim.x) sum += expf(l[j] - m);
  sum = block_sum(sum, shared);
  if (threadIdx.x == 0) losses[row] = m + logf(sum) - target_logit;
  if (backward) {
    const float f = dloss / sum;
    for (int j = threadIdx.x; j < V; j += blockDim.x) {
      const float d = expf(l[j] - m) * f;
      l[j] = j == target ? d - dloss : d;
    }
  }
}

__global__ void xent_row_max_kernel(float* row_max, const float* logits, int V) {
  __shared__ float shared[32];
  const float* l = logits + static_cast<size_t>(blockIdx.x) * V;
  float m = -INFINITY;
  for (int j = threadIdx.x; j < V; j += blockDim.x) m = fmaxf(m, l[j]);
  m = block_max(m, shared);
  if (threadIdx.x == 0) row_max[blockIdx.x] = m;
}

__global__ void xent_partial_sums_kernel(float* stats, const float* logits, const float* row_max,
                                         const int32_t* targets, VocabRange vocab) {
  __shared__ double shared[32];
  const int row = blockIdx.x;
  const int V = vocab.count;
  const float* l = logits + static_cast<size_t>(row) * V;
  const float m = row_max[row];
  double sum = 0.0;  // double, as the CPU backend: the sum over the group must stay exact
  for (int j = threadIdx.x; j < V; j += blockDim.x) sum += expf(l[j] - m);
  sum = block_sum(sum, shared);
  if (threadIdx.x == 0) {
    const int32_t t = targets[row];
    stats[2 * row] = static_cast<float>(sum);
    stats[2 * row + 1] = holds(vocab, t) ? l[t - vocab.begin] : 0.0f;
  }
}

__global__ void xent_finish_kernel(float* losses, float* dlogits, const float* logits,
                                   const float* row_max, const float* stats, const int32_t* targets,
                                   VocabRange vocab, float dloss) {
  const int row = blockIdx.x;
  const int V = vocab.count;
  const int32_t target = targets[row];
  const float* l = logits + static_cast<size_t>(row) * V;
  float* d = dlogits != nullptr ? dlogits + static_cast<size_t>(row) * V : nullptr;
  if (target < 0) {
    if (threadIdx.x == 0) losses[row] = 0.0f;
    if (d != nullptr) {
      for (int j = threadIdx.x; j < V; j += blockDim.x) d[j] = 0.0f;
    }
    return;
  }
  const float m = row_max[row];
  const float sum = stats[2 * row];
  if (threadIdx.x == 0) losses[row] = m + logf(sum) - stats[2 * row + 1];
  if (d != nullptr) {
    const float f = dloss / sum;
    const int local_target = holds(vocab, target) ? target - vocab.begin : -1;
    // Each element is read then written by the same thread: dlogits may alias logits.
    for (int j = threadIdx.x; j < V; j += blockDim.x) {
      const float g = expf(l[j] - m) * f;
      d[j] = j == local_target ? g - dloss : g;
    }
  }
}

}  // namespace

void launch_softmax_xent_rows(cudaStream_t s, float* losses, float* logits, const int32_t* targets,
                              int n, int V, bool backward, float dloss, int* bad_row) {
  if (n <= 0) return;
  softmax_xent_rows_kernel<<<n, kThreads, 0, s>>>(losses, logits, targets, V, backward, dloss,
                                                  bad_row);
  TRAINCTL_CUDA_CHECK_LAUNCH(softmax_xent_rows_kernel);
}

void launch_xent_row_max(cudaStream_t s, float* row_max, const float* logits, int N, int V) {
  if (N <= 0) return;
  xent_row_max_kernel<<<N, kThreads, 0, s>>>(row_max, logits, V);
  TRAINCTL_CUDA_CHECK_LAUNCH(xent_row_max_kernel);
}

void launch_xent_partial_sums(cudaStream_t s, float* stats, const float* logits,
                              const float* row_max, const int32_t* targets, VocabRange vocab,
                              int N) {
  if (N <= 0) return;
  xent_partial_sums_kernel<<<N, kThreads, 0, s>>>(stats, logits, row_max, targets, vocab);
  TRAINCTL_CUDA_CHECK_LAUNCH(xent_partial_sums_kernel);
}

void launch_xent_finish(cudaStream_t s, float* losses, float* dlogits, const float* logits,
                        const float* row_max, const float* stats, const int32_t* targets,
                        VocabRange vocab, int N, float dloss) {
  if (N <= 0) return;
  xent_finish_kernel<<<N, kThreads, 0, s>>>(losses, dlogits, logits, row_max, stats, targets, vocab,
                                            dloss);
  TRAINCTL_CUDA_CHECK_LAUNCH(xent_finish_kernel);
}

}  // namespace trainctl::ops::cuda
