// Causal self-attention, written to be obviously correct rather than fast: one warp per
// query row (forward, dQ) or key row (dK, dV), looping over the rows it attends with an
// online softmax. The lanes split the head dimension; each q.k product is a warp sum.
// No T x T matrix is stored and no atomics are used: results are deterministic.
//
// Layout (nanoGPT's c_attn output): qkv [B, T, 3C], head h of q at [b, t, h*hs : (h+1)*hs],
// k at +C, v at +2C. Row index of (b, h, t) in lse and the scratch: (b * NH + h) * T + t.
#include <cmath>
#include <stdexcept>
#include <string>

#include "cuda_abi/cuda_check.h"
#include "ops/cuda/device_reduce.cuh"
#include "ops/cuda/kernels.h"

namespace trainctl::ops::cuda {

namespace {

constexpr int kPerLane = kMaxHeadDim / 32;
constexpr int kWarpsPerBlock = 4;

struct RowIndex {
  int64_t b;
  int h, t;
};

__device__ inline RowIndex split_row(int64_t row, int T, int NH) {
  RowIndex r;
  r.t = static_cast<int>(row % T);
  const int64_t bh = row / T;
  r.h = static_cast<int>(bh % NH);
  r.b = bh / NH;
  return r;
}

// Loads this lane's slice of a head vector (zeros beyond hs).
__device__ inline void load_head(float (&dst)[kPerLane], const float* src, int hs, int lane,
                                 float f = 1.0f) {
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) {
    const int d = lane + 32 * k;
    dst[k] = d < hs ? src[d] * f : 0.0f;
  }
}

// The dot product of a register slice with a head vector in memory, summed over the warp.
__device__ inline float warp_dot(const float (&a)[kPerLane], const float* b, int hs, int lane) {
  float s = 0.0f;
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) {
    const int d = lane + 32 * k;
    if (d < hs) s += a[k] * b[d];
  }
  return warp_sum(s);
}

__global__ void attention_forward_kernel(float* out, float* lse, const float* qkv, int B, int T,
                                         int C, int NH, float scale) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (row >= static_cast<int64_t>(B) * NH * T) return;
  const int lane = threadIdx.x % 32;
  const RowIndex ri = split_row(row, T, NH);
  const int hs = C / NH, C3 = 3 * C;
  const float* base = qkv + ri.b * T * C3 + static_cast<int64_t>(ri.h) * hs;
  float q[kPerLane], acc[kPerLane];
  load_head(q, base + static_cast<int64_t>(ri.t) * C3, hs, lane, scale);
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) acc[k] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  for (int j = 0; j <= ri.t; ++j) {
    const float* kj = base + static_cast<int64_t>(j) * C3 + C;
    const float s = warp_dot(q, kj, hs, lane);
    const float m_new = fmaxf(m, s);
    const float correction = expf(m - m_new);  // 0 on the first key (m = -inf)
    const float p = expf(s - m_new);
    l = l * correction + p;
    const float* vj = kj + C;
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
      const int d = lane + 32 * k;
      acc[k] = acc[k] * correction + (d < hs ? p * vj[d] : 0.0f);
    }
    m = m_new;
  }
  float* o = out + (ri.b * T + ri.t) * C + static_cast<int64_t>(ri.h) * hs;
  const float inv = 1.0f / l;
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) {
    const int d = lane + 32 * k;
    if (d < hs) o[d] = acc[k] * inv;
  }
  if (lane == 0) lse[row] = m + logf(l);
}

// delta[row] = dout . out for the row's head slice.
__global__ void attention_delta_kernel(float* delta, const float* dout, const float* out, int B,
                                       int T, int C, int NH) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (row >= static_cast<int64_t>(B) * NH * T) return;
  const int lane = threadIdx.x % 32;
  const RowIndex ri = split_row(row, T, NH);
  const int hs = C / NH;
  const int64_t off = (ri.b * T + ri.t) * C + static_cast<int64_t>(ri.h) * hs;
  float s = 0.0f;
  for (int d = lane; d < hs; d += 32) s += dout[off + d] * out[off + d];
  s = warp_sum(s);
  if (lane == 0) delta[row] = s;
}

// dQ for query t: sum over keys j <= t of scale * dS[t, j] * k_j, with
// P = exp(scale q.k - lse), dS = P * (dO . v_j - delta).
__global__ void attention_dq_kernel(float* dqkv, const float* dout, const float* qkv,
                                    const float* lse, const float* delta, int B, int T, int C,
                                    int NH, float scale) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (row >= static_cast<int64_t>(B) * NH * T) return;
  const int lane = threadIdx.x % 32;
  const RowIndex ri = split_row(row, T, NH);
  const int hs = C / NH, C3 = 3 * C;
  const int64_t head = static_cast<int64_t>(ri.h) * hs;
  const float* base = qkv + ri.b * T * C3 + head;
  float q[kPerLane], g[kPerLane], dq[kPerLane];
  load_head(q, base + static_cast<int64_t>(ri.t) * C3, hs, lane, scale);
  load_head(g, dout + (ri.b * T + ri.t) * C + head, hs, lane);
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) dq[k] = 0.0f;
  const float row_lse = lse[row], row_delta = delta[row];
  for (int j = 0; j <= ri.t; ++j) {
    const float* kj = base + static_cast<int64_t>(j) * C3 + C;
    const float p = expf(warp_dot(q, kj, hs, lane) - row_lse);
    const float ds = p * (warp_dot(g, kj + C, hs, lane) - row_delta);
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
      const int d = lane + 32 * k;
      if (d < hs) dq[k] += ds * kj[d];
    }
  }
  float* dst = dqkv + (ri.b * T + ri.t) * C3 + head;
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) {
    const int d = lane + 32 * k;
    if (d < hs) dst[d] = scale * dq[k];
  }
}

// dK and dV for key j: sums over queries t >= j of scale * dS[t, j] * q_t and P[t, j] * dO_t.
__global__ void attention_dkdv_kernel(float* dqkv, const float* dout, const float* qkv,
                                      const float* lse, const float* delta, int B, int T, int C,
                                      int NH, float scale) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (row >= static_cast<int64_t>(B) * NH * T) return;
  const int lane = threadIdx.x % 32;
  const RowIndex ri = split_row(row, T, NH);  // ri.t is the key index j here
  const int hs = C / NH, C3 = 3 * C;
  const int64_t head = static_cast<int64_t>(ri.h) * hs;
  const float* base = qkv + ri.b * T * C3 + head;
  const int64_t lse_base = row - ri.t;  // row of (b, h, t = 0)
  float kr[kPerLane], vr[kPerLane], dk[kPerLane], dv[kPerLane];
  load_head(kr, base + static_cast<int64_t>(ri.t) * C3 + C, hs, lane, scale);
  load_head(vr, base + static_cast<int64_t>(ri.t) * C3 + 2 * C, hs, lane);
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) dk[k] = dv[k] = 0.0f;
  for (int t = ri.t; t < T; ++t) {
    const float* qt = base + static_cast<int64_t>(t) * C3;
    const float* gt = dout + (ri.b * T + t) * C + head;
    const float p = expf(warp_dot(kr, qt, hs, lane) - lse[lse_base + t]);
    const float ds = p * (warp_dot(vr, gt, hs, lane) - delta[lse_base + t]);
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
      const int d = lane + 32 * k;
      if (d < hs) {
        dk[k] += ds * qt[d];
        dv[k] += p * gt[d];
      }
    }
  }
  float* dst = dqkv + (ri.b * T + ri.t) * C3 + head;
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) {
    const int d = lane + 32 * k;
    if (d < hs) {
      dst[C + d] = scale * dk[k];
      dst[2 * C + d] = dv[k];
    }
  }
}

void check_shape(int T, int C, int NH) {
  if (NH <= 0 || C % NH != 0) {
    throw std::invalid_argument("attention: C=" + std::to_string(C) +
                                " is not divisible by NH=" + std::to_string(NH));
  }
  if (T <= 0) throw std::invalid_argument("attention: T must be positive");
  if (C / NH > kMaxHeadDim) {
    throw std::invalid_argument("attention (CUDA): head size " + std::to_string(C / NH) +
                                " exceeds the kernels' maximum of " + std::to_string(kMaxHeadDim));
  }
}

unsigned int blocks_for_rows(int64_t rows) {
  return static_cast<unsigned int>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
}

}  // namespace

void launch_attention_forward(cudaStream_t s, float* out, float* lse, const float* qkv, int B,
                              int T, int C, int NH) {
  check_shape(T, C, NH);
  const int64_t rows = static_cast<int64_t>(B) * NH * T;
  if (rows == 0) return;
  const float scale = 1.0f / std::sqrt(static_cast<float>(C / NH));
  attention_forward_kernel<<<blocks_for_rows(rows), kWarpsPerBlock * 32, 0, s>>>(out, lse, qkv, B,
                                                                                 T, C, NH, scale);
  TRAINCTL_CUDA_CHECK_LAUNCH(attention_forward_kernel);
}

void launch_attention_backward(cudaStream_t s, float* dqkv, const float* dout, const float* qkv,
                               const float* out, const float* lse, int B, int T, int C, int NH,
                               float* scratch) {
  check_shape(T, C, NH);
  const int64_t rows = static_cast<int64_t>(B) * NH * T;
  if (rows == 0) return;
  const float scale = 1.0f / std::sqrt(static_cast<float>(C / NH));
  const unsigned int blocks = blocks_for_rows(rows);
  constexpr int kThreads = kWarpsPerBlock * 32;
  attention_delta_kernel<<<blocks, kThreads, 0, s>>>(scratch, dout, out, B, T, C, NH);
  TRAINCTL_CUDA_CHECK_LAUNCH(attention_delta_kernel);
  attention_dq_kernel<<<blocks, kThreads, 0, s>>>(dqkv, dout, qkv, lse, scratch, B, T, C, NH,
                                                  scale);
  TRAINCTL_CUDA_CHECK_LAUNCH(attention_dq_kernel);
  attention_dkdv_kernel<<<blocks, kThreads, 0, s>>>(dqkv, dout, qkv, lse, scratch, B, T, C, NH,
                                                    scale);
  TRAINCTL_CUDA_CHECK_LAUNCH(attention_dkdv_kernel);
}

}  // namespace trainctl::ops::cuda
