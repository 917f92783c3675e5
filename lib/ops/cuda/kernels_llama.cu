// The Llama family's elementwise ops: RMSNorm, rotary position embedding (RoPE) and SwiGLU.
// RMSNorm follows the LayerNorm kernels (one warp per row; the weight gradient goes
// through per-chunk partials summed in a fixed order, so results do not depend on
// scheduling). RoPE and SwiGLU are one thread per output element (pair, for RoPE).
#include <algorithm>
#include <stdexcept>
#include <string>

#include "cuda_abi/cuda_check.h"
#include "ops/cuda/device_reduce.cuh"
#include "ops/cuda/kernels.h"
#include "ops/llama_math.h"

namespace trainctl::ops::cuda {

namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kRowsPerChunk = 256;
constexpr int kThreads = 256;

__global__ void rmsnorm_forward_kernel(float* out, float* rstd, const float* inp,
                                       const float* weight, int N, int C, float eps) {
  const int row = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= N) return;
  const float* x = inp + static_cast<size_t>(row) * C;
  float ss = 0.0f;
  for (int i = lane; i < C; i += 32) ss += x[i] * x[i];
  const float r = 1.0f / sqrtf(warp_sum(ss) / static_cast<float>(C) + eps);
  float* o = out + static_cast<size_t>(row) * C;
  for (int i = lane; i < C; i += 32) o[i] = x[i] * r * weight[i];
  if (lane == 0) rstd[row] = r;
}

// y = xhat * w with xhat = x * rstd: dx = rstd * (dy * w - xhat * mean(dy * w * xhat)).
__global__ void rmsnorm_dinp_kernel(float* dinp, const float* dout, const float* inp,
                                    const float* weight, const float* rstd, int N, int C) {
  const int row = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= N) return;
  const size_t off = static_cast<size_t>(row) * C;
  const float r = rstd[row];
  float dot = 0.0f;
  for (int i = lane; i < C; i += 32) dot += dout[off + i] * weight[i] * (inp[off + i] * r);
  const float m = warp_sum(dot) / static_cast<float>(C);
  for (int i = lane; i < C; i += 32) {
    dinp[off + i] = r * (dout[off + i] * weight[i] - inp[off + i] * r * m);
  }
}

// partials[chunk][c] = sum over the chunk's rows of dy * xhat. Thread per column.
__global__ void rmsnorm_weight_partials_kernel(float* partials, const float* dout, const float* inp,
                                               const float* rstd, int N, int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  const int chunk = blockIdx.y;
  if (c >= C) return;
  const int r0 = chunk * kRowsPerChunk, r1 = min(N, r0 + kRowsPerChunk);
  float dw = 0.0f;
  for (int r = r0; r < r1; ++r) {
    const size_t i = static_cast<size_t>(r) * C + c;
    dw += dout[i] * (inp[i] * rstd[r]);
  }
  partials[static_cast<size_t>(chunk) * C + c] = dw;
}

__global__ void rmsnorm_weight_finish_kernel(float* dweight, const float* partials, int chunks,
                                             int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float dw = 0.0f;
  for (int k = 0; k < chunks; ++k) dw += partials[static_cast<size_t>(k) * C + c];
  dweight[c] += dw;
}

// The inverse frequencies travel as a kernel argument (at most 128 floats): computed once
// on the host with the CPU backend's formula, so both backends rotate by the same angles.
struct InvFreq {
  float v[kMaxHeadDim / 2];
};

// One thread per rotated pair (row, head, i < half): (x[i], x[i + half]) rotates by
// sign * (pos0 + t) * inv_freq[i]. Index order: i fastest, then head, then row.
__global__ void rope_kernel(float* x, int64_t pairs, int T, int row_stride, int heads, int head_dim,
                            InvFreq inv_freq, int pos0, float sign) {
  const int half = head_dim / 2;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < pairs;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int i = static_cast<int>(k % half);
    const int64_t rh = k / half;
    const int h = static_cast<int>(rh % heads);
    const int64_t row = rh / heads;
    const float pos = static_cast<float>(pos0 + static_cast<int>(row % T));
    const float angle = pos * inv_freq.v[i];
    const float c = cosf(angle);
    const float s = sign * sinf(angle);
    float* v = x + row * row_stride + static_cast<int64_t>(h) * head_dim;
    const float a = v[i], b = v[i + half];
    v[i] = math::rope_first(a, b, c, s);
    v[i + half] = math::rope_second(a, b, c, s);
  }
}

__global__ void swiglu_forward_kernel(float* out, const float* gate_up, int64_t n, int H) {
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < n;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = k / H;
    const int i = static_cast<int>(k % H);
    const float* g = gate_up + r * 2 * H;
    out[k] = math::swiglu(g[i], g[H + i]);
  }
}

__global__ void swiglu_backward_kernel(float* dgate_up, const float* dout, const float* gate_up,
                                       int64_t n, int H) {
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < n;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = k / H;
    const int i = static_cast<int>(k % H);
    const float* g = gate_up + r * 2 * H;
    float* dg = dgate_up + r * 2 * H;
    float d_gate = 0.0f, d_up = 0.0f;
    math::swiglu_grad(g[i], g[H + i], dout[k], &d_gate, &d_up);
    dg[i] = d_gate;
    dg[H + i] = d_up;
  }
}

void launch_rope(cudaStream_t s, float* x, int B, int T, int row_stride, int heads, int head_dim,
                 float theta, int pos0, float sign) {
  if (head_dim <= 0 || head_dim % 2 != 0 || head_dim > kMaxHeadDim) {
    throw std::invalid_argument("rope (CUDA): head_dim " + std::to_string(head_dim) +
                                " must be even and at most " + std::to_string(kMaxHeadDim));
  }
  if (heads < 0 || row_stride < heads * head_dim) {
    throw std::invalid_argument("rope: " + std::to_string(heads) + " heads of " +
                                std::to_string(head_dim) + " do not fit a row of " +
                                std::to_string(row_stride));
  }
  const int half = head_dim / 2;
  const int64_t pairs = int64_t{B} * T * heads * half;
  if (pairs <= 0) return;
  InvFreq inv{};
  for (int i = 0; i < half; ++i) inv.v[i] = math::rope_inv_freq(i, head_dim, theta);
  rope_kernel<<<grid_for(static_cast<size_t>(pairs), kThreads), kThreads, 0, s>>>(
      x, pairs, T, row_stride, heads, head_dim, inv, pos0, sign);
  TRAINCTL_CUDA_CHECK_LAUNCH(rope_kernel);
}

}  // namespace

void launch_rmsnorm_forward(cudaStream_t s, float* out, float* rstd, const float* inp,
                            const float* weight, int N, int C, float eps) {
  if (N <= 0) return;
  const int blocks = (N + kWarpsPerBlock - 1) / kWarpsPerBlock;
  rmsnorm_forward_kernel<<<blocks, kWarpsPerBlock * 32, 0, s>>>(out, rstd, inp, weight, N, C, eps);
  TRAINCTL_CUDA_CHECK_LAUNCH(rmsnorm_forward_kernel);
}

size_t rmsnorm_backward_partials(int N, int C) {
  const size_t chunks = (static_cast<size_t>(std::max(N, 0)) + kRowsPerChunk - 1) / kRowsPerChunk;
  return chunks * static_cast<size_t>(std::max(C, 0));
}

void launch_rmsnorm_backward(cudaStream_t s, float* dinp, float* dweight, const float* dout,
                             const float* inp, const float* weight, const float* rstd, int N, int C,
                             float* partials) {
  if (N <= 0 || C <= 0) return;
  const int blocks = (N + kWarpsPerBlock - 1) / kWarpsPerBlock;
  rmsnorm_dinp_kernel<<<blocks, kWarpsPerBlock * 32, 0, s>>>(dinp, dout, inp, weight, rstd, N, C);
  TRAINCTL_CUDA_CHECK_LAUNCH(rmsnorm_dinp_kernel);
  const int chunks = (N + kRowsPerChunk - 1) / kRowsPerChunk;
  constexpr int kColumnThreads = 128;
  const dim3 grid((C + kColumnThreads - 1) / kColumnThreads, chunks);
  rmsnorm_weight_partials_kernel<<<grid, kColumnThreads, 0, s>>>(partials, dout, inp, rstd, N, C);
  TRAINCTL_CUDA_CHECK_LAUNCH(rmsnorm_weight_partials_kernel);
  rmsnorm_weight_finish_kernel<<<(C + kColumnThreads - 1) / kColumnThreads, kColumnThreads, 0, s>>>(
      dweight, partials, chunks, C);
  TRAINCTL_CUDA_CHECK_LAUNCH(rmsnorm_weight_finish_kernel);
}

void launch_rope_forward(cudaStream_t s, float* x, int B, int T, int row_stride, int heads,
                         int head_dim, float theta, int pos0) {
  launch_rope(s, x, B, T, row_stride, heads, head_dim, theta, pos0, 1.0f);
}

void launch_rope_backward(cudaStream_t s, float* dx, int B, int T, int row_stride, int heads,
                          int head_dim, float theta, int pos0) {
  launch_rope(s, dx, B, T, row_stride, heads, head_dim, theta, pos0, -1.0f);
}

void launch_swiglu_forward(cudaStream_t s, float* out, const float* gate_up, int N, int H) {
  const int64_t n = int64_t{N} * H;
  if (n <= 0) return;
  swiglu_forward_kernel<<<grid_for(static_cast<size_t>(n), kThreads), kThreads, 0, s>>>(
      out, gate_up, n, H);
  TRAINCTL_CUDA_CHECK_LAUNCH(swiglu_forward_kernel);
}

void launch_swiglu_backward(cudaStream_t s, float* dgate_up, const float* dout,
                            const float* gate_up, int N, int H) {
  const int64_t n = int64_t{N} * H;
  if (n <= 0) return;
  swiglu_backward_kernel<<<grid_for(static_cast<size_t>(n), kThreads), kThreads, 0, s>>>(
      dgate_up, dout, gate_up, n, H);
  TRAINCTL_CUDA_CHECK_LAUNCH(swiglu_backward_kernel);
}

}  // namespace trainctl::ops::cuda
