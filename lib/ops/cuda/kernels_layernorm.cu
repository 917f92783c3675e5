// LayerNorm over the last dimension (PyTorch semantics: biased variance, eps 1e-5).
// One warp per row; the parameter gradients (sums over rows) go through per-chunk partials
// reduced in a fixed order, so results do not depend on scheduling.
#include "cuda_abi/cuda_check.h"
#include "ops/cuda/device_reduce.cuh"
#include "ops/cuda/kernels.h"
#include "ops/shared_math.h"

namespace trainctl::ops::cuda {

namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kRowsPerChunk = 256;

__global__ void layernorm_forward_kernel(float* out, float* mean, float* rstd, const float* inp,
                                         const float* weight, const float* bias, int N, int C) {
  const int row = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= N) return;
  const float* x = inp + static_cast<size_t>(row) * C;
  float s = 0.0f;
  for (int i = lane; i < C; i += 32) s += x[i];
  const float m = warp_sum(s) / static_cast<float>(C);
  float v = 0.0f;
  for (int i = lane; i < C; i += 32) {
    const float d = x[i] - m;
    v += d * d;
  }
  const float r = 1.0f / sqrtf(warp_sum(v) / static_cast<float>(C) + math::kLayerNormEps);
  float* o = out + static_cast<size_t>(row) * C;
  for (int i = lane; i < C; i += 32) o[i] = (x[i] - m) * r * weight[i] + bias[i];
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = r;
  }
}

// dinp for one row per warp: dx = rstd * (dnorm - mean(dnorm) - xhat * mean(dnorm * xhat)).
__global__ void layernorm_dinp_kernel(float* dinp, const float* dout, const float* inp,
                                      const float* weight, const float* mean, const float* rstd,
                                      int N, int C) {
  const int row = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= N) return;
  const size_t off = static_cast<size_t>(row) * C;
  const float m = mean[row], r = rstd[row];
  float sum_dnorm = 0.0f, sum_dnorm_xhat = 0.0f;
  for (int i = lane; i < C; i += 32) {
    const float xhat = (inp[off + i] - m) * r;
    const float dnorm = dout[off + i] * weight[i];
    sum_dnorm += dnorm;
    sum_dnorm_xhat += dnorm * xhat;
  }
  const float mean_dnorm = warp_sum(sum_dnorm) / static_cast<float>(C);
  const float mean_dnorm_xhat = warp_sum(sum_dnorm_xhat) / static_cast<float>(C);
  for (int i = lane; i < C; i += 32) {
    const float xhat = (inp[off + i] - m) * r;
    dinp[off + i] = r * (dout[off + i] * weight[i] - mean_dnorm - xhat * mean_dnorm_xhat);
  }
}

// Per chunk of rows and column c: partials[chunk][c] = sum g * xhat, partials[chunk][C + c] =
// sum g. Thread per column (consecutive threads read consecutive columns).
__global__ void layernorm_param_partials_kernel(float* partials, const float* dout,
                                                const float* inp, const float* mean,
                                                const float* rstd, int N, int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  const int chunk = blockIdx.y;
  if (c >= C) return;
  const int r0 = chunk * kRowsPerChunk, r1 = min(N, r0 + kRowsPerChunk);
  float dw = 0.0f, db = 0.0f;
  for (int r = r0; r < r1; ++r) {
    const size_t i = static_cast<size_t>(r) * C + c;
    const float g = dout[i];
    dw += g * (inp[i] - mean[r]) * rstd[r];
    db += g;
  }
  float* p = partials + static_cast<size_t>(chunk) * 2 * C;
  p[c] = dw;
  p[C + c] = db;
}

__global__ void layernorm_param_finish_kernel(float* dweight, float* dbias, const float* partials,
                                              int chunks, int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float dw = 0.0f, db = 0.0f;
  for (int k = 0; k < chunks; ++k) {
    const float* p = partials + static_cast<size_t>(k) * 2 * C;
    dw += p[c];
    db += p[C + c];
  }
  dweight[c] += dw;
  dbias[c] += db;
}

}  // namespace

void launch_layernorm_forward(cudaStream_t s, float* out, float* mean, float* rstd,
                              const float* inp, const float* weight, const float* bias, int N,
                              int C) {
  if (N <= 0) return;
  const int blocks = (N + kWarpsPerBlock - 1) / kWarpsPerBlock;
  layernorm_forward_kernel<<<blocks, kWarpsPerBlock * 32, 0, s>>>(out, mean, rstd, inp, weight,
                                                                  bias, N, C);
  TRAINCTL_CUDA_CHECK_LAUNCH(layernorm_forward_kernel);
}

size_t layernorm_backward_partials(int N, int C) {
  const size_t chunks = (static_cast<size_t>(N) + kRowsPerChunk - 1) / kRowsPerChunk;
  return chunks * 2 * static_cast<size_t>(C);
}

void launch_layernorm_backward(cudaStream_t s, float* dinp, float* dweight, float* dbias,
                               const float* dout, const float* inp, const float* weight,
                               const float* mean, const float* rstd, int N, int C,
                               float* partials) {
  if (N <= 0) return;
  const int blocks = (N + kWarpsPerBlock - 1) / kWarpsPerBlock;
  layernorm_dinp_kernel<<<blocks, kWarpsPerBlock * 32, 0, s>>>(dinp, dout, inp, weight, mean, rstd,
                                                               N, C);
  TRAINCTL_CUDA_CHECK_LAUNCH(layernorm_dinp_kernel);
  const int chunks = (N + kRowsPerChunk - 1) / kRowsPerChunk;
  constexpr int kThreads = 128;
  const dim3 grid((C + kThreads - 1) / kThreads, chunks);
  layernorm_param_partials_kernel<<<grid, kThreads, 0, s>>>(partials, dout, inp, mean, rstd, N, C);
  TRAINCTL_CUDA_CHECK_LAUNCH(layernorm_param_partials_kernel);
  layernorm_param_finish_kernel<<<(C + kThreads - 1) / kThreads, kThreads, 0, s>>>(
      dweight, dbias, partials, chunks, C);
  TRAINCTL_CUDA_CHECK_LAUNCH(layernorm_param_finish_kernel);
}

}  // namespace trainctl::ops::cuda
