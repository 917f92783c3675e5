// Causal self-attention, written to be obviously correct rather than fast: one warp per
// query row (forward, dQ) or key row (dK, dV), looping over the rows it attends with an
// online softmax. The lanes split the head dimension; each q.k product is a warp sum.
// No T x T matrix is stored and no atomics are used: results are deterministic.
//
// Layout (AttentionShape): qkv [B, T, W] with W = (NH + 2 KVH) hs; query head h of row
// (b, t) at [b, t, h*hs : (h+1)*hs], k/v head g at offset NH*hs + g*hs and
// (NH + KVH)*hs + g*hs. Query head h reads k/v head h / group (group = NH / KVH).
// Row index of (b, h, t) in lse and the scratch: (b * NH + h) * T + t.
//
// Grouped-query backward: one warp per (b, k/v head, key j) loops over the group's query
// heads in order, so the k/v gradient is a fixed-order sum. With group 1 the loops (and
// so the rounding) are exactly those of the multi-head kernels this replaced.
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

// The shape's sizes and offsets (in floats) as the kernels use them.
struct Geometry {
  int B, T, NH, KVH, hs, group;
  int W;      // qkv row width
  int OW;     // out / dout row width (NH * hs)
  int k_off;  // first k head in a qkv row
  int v_off;  // first v head in a qkv row
};

Geometry geometry(const AttentionShape& s) {
  return {s.B,       s.T,           s.n_head,    s.n_kv_head, s.head_dim,
          s.group(), s.qkv_width(), s.q_width(), s.q_width(), s.q_width() + s.kv_width()};
}

__global__ void attention_forward_kernel(float* out, float* lse, const float* qkv, Geometry g,
                                         float scale) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (row >= static_cast<int64_t>(g.B) * g.NH * g.T) return;
  const int lane = threadIdx.x % 32;
  const RowIndex ri = split_row(row, g.T, g.NH);
  const int hs = g.hs;
  const int64_t kv_head = static_cast<int64_t>(ri.h / g.group) * hs;
  const float* seq = qkv + ri.b * g.T * g.W;
  float q[kPerLane], acc[kPerLane];
  load_head(q, seq + static_cast<int64_t>(ri.t) * g.W + static_cast<int64_t>(ri.h) * hs, hs, lane,
            scale);
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) acc[k] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  for (int j = 0; j <= ri.t; ++j) {
    const float* kj = seq + static_cast<int64_t>(j) * g.W + g.k_off + kv_head;
    const float s = warp_dot(q, kj, hs, lane);
    const float m_new = fmaxf(m, s);
    const float correction = expf(m - m_new);  // 0 on the first key (m = -inf)
    const float p = expf(s - m_new);
    l = l * correction + p;
    const float* vj = seq + static_cast<int64_t>(j) * g.W + g.v_off + kv_head;
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
      const int d = lane + 32 * k;
      acc[k] = acc[k] * correction + (d < hs ? p * vj[d] : 0.0f);
    }
    m = m_new;
  }
  float* o = out + (ri.b * g.T + ri.t) * g.OW + static_cast<int64_t>(ri.h) * hs;
  const float inv = 1.0f / l;
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) {
    const int d = lane + 32 * k;
    if (d < hs) o[d] = acc[k] * inv;
  }
  if (lane == 0) lse[row] = m + logf(l);
}

// One new token's attention over a key/value cache [len, KVH * hs]: one warp per query
// head, the same online softmax as the forward kernel's last row.
__global__ void attention_decode_kernel(float* out, const float* q, const float* k_cache,
                                        const float* v_cache, int len, int NH, int group, int hs,
                                        int kv_width, float scale) {
  const int h = static_cast<int>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (h >= NH) return;
  const int lane = threadIdx.x % 32;
  const int64_t kv_head = static_cast<int64_t>(h / group) * hs;
  float qr[kPerLane], acc[kPerLane];
  load_head(qr, q + static_cast<int64_t>(h) * hs, hs, lane, scale);
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) acc[k] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  for (int j = 0; j < len; ++j) {
    const int64_t at = static_cast<int64_t>(j) * kv_width + kv_head;
    const float s = warp_dot(qr, k_cache + at, hs, lane);
    const float m_new = fmaxf(m, s);
    const float correction = expf(m - m_new);  // 0 on the first key (m = -inf)
    const float p = expf(s - m_new);
    l = l * correction + p;
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
      const int d = lane + 32 * k;
      acc[k] = acc[k] * correction + (d < hs ? p * v_cache[at + d] : 0.0f);
    }
    m = m_new;
  }
  float* o = out + static_cast<int64_t>(h) * hs;
  const float inv = 1.0f / l;
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) {
    const int d = lane + 32 * k;
    if (d < hs) o[d] = acc[k] * inv;
  }
}

// delta[row] = dout . out for the row's head slice.
__global__ void attention_delta_kernel(float* delta, const float* dout, const float* out,
                                       Geometry g) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (row >= static_cast<int64_t>(g.B) * g.NH * g.T) return;
  const int lane = threadIdx.x % 32;
  const RowIndex ri = split_row(row, g.T, g.NH);
  const int64_t off = (ri.b * g.T + ri.t) * g.OW + static_cast<int64_t>(ri.h) * g.hs;
  float s = 0.0f;
  for (int d = lane; d < g.hs; d += 32) s += dout[off + d] * out[off + d];
  s = warp_sum(s);
  if (lane == 0) delta[row] = s;
}

// dQ for query t: sum over keys j <= t of scale * dS[t, j] * k_j, with
// P = exp(scale q.k - lse), dS = P * (dO . v_j - delta).
__global__ void attention_dq_kernel(float* dqkv, const float* dout, const float* qkv,
                                    const float* lse, const float* delta, Geometry g, float scale) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (row >= static_cast<int64_t>(g.B) * g.NH * g.T) return;
  const int lane = threadIdx.x % 32;
  const RowIndex ri = split_row(row, g.T, g.NH);
  const int hs = g.hs;
  const int64_t head = static_cast<int64_t>(ri.h) * hs;
  const int64_t kv_head = static_cast<int64_t>(ri.h / g.group) * hs;
  const float* seq = qkv + ri.b * g.T * g.W;
  float q[kPerLane], gr[kPerLane], dq[kPerLane];
  load_head(q, seq + static_cast<int64_t>(ri.t) * g.W + head, hs, lane, scale);
  load_head(gr, dout + (ri.b * g.T + ri.t) * g.OW + head, hs, lane);
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) dq[k] = 0.0f;
  const float row_lse = lse[row], row_delta = delta[row];
  for (int j = 0; j <= ri.t; ++j) {
    const float* kj = seq + static_cast<int64_t>(j) * g.W + g.k_off + kv_head;
    const float* vj = seq + static_cast<int64_t>(j) * g.W + g.v_off + kv_head;
    const float p = expf(warp_dot(q, kj, hs, lane) - row_lse);
    const float ds = p * (warp_dot(gr, vj, hs, lane) - row_delta);
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
      const int d = lane + 32 * k;
      if (d < hs) dq[k] += ds * kj[d];
    }
  }
  float* dst = dqkv + (ri.b * g.T + ri.t) * g.W + head;
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) {
    const int d = lane + 32 * k;
    if (d < hs) dst[d] = scale * dq[k];
  }
}

// dK and dV for key j of k/v head kh: sums over the group's query heads h (in order) and
// queries t >= j of scale * dS_h[t, j] * q_{h,t} and P_h[t, j] * dO_{h,t}.
__global__ void attention_dkdv_kernel(float* dqkv, const float* dout, const float* qkv,
                                      const float* lse, const float* delta, Geometry g,
                                      float scale) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (row >= static_cast<int64_t>(g.B) * g.KVH * g.T) return;
  const int lane = threadIdx.x % 32;
  const RowIndex ri = split_row(row, g.T, g.KVH);  // ri.h: the k/v head; ri.t: the key j
  const int hs = g.hs;
  const int64_t kv_head = static_cast<int64_t>(ri.h) * hs;
  const float* seq = qkv + ri.b * g.T * g.W;
  const float* key_row = seq + static_cast<int64_t>(ri.t) * g.W;
  float kr[kPerLane], vr[kPerLane], dk[kPerLane], dv[kPerLane];
  load_head(kr, key_row + g.k_off + kv_head, hs, lane, scale);
  load_head(vr, key_row + g.v_off + kv_head, hs, lane);
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) dk[k] = dv[k] = 0.0f;
  for (int member = 0; member < g.group; ++member) {
    const int h = ri.h * g.group + member;
    const int64_t head = static_cast<int64_t>(h) * hs;
    const int64_t lse_base = (ri.b * g.NH + h) * g.T;  // row of (b, h, t = 0)
    for (int t = ri.t; t < g.T; ++t) {
      const float* qt = seq + static_cast<int64_t>(t) * g.W + head;
      const float* gt = dout + (ri.b * g.T + t) * g.OW + head;
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
  }
  float* dst = dqkv + (ri.b * g.T + ri.t) * g.W + kv_head;
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) {
    const int d = lane + 32 * k;
    if (d < hs) {
      dst[g.k_off + d] = scale * dk[k];
      dst[g.v_off + d] = dv[k];
    }
  }
}

void check_shape(const AttentionShape& shape) {
  shape.check();
  if (shape.head_dim > kMaxHeadDim) {
    throw std::invalid_argument("attention (CUDA): head size " + std::to_string(shape.head_dim) +
                                " exceeds the kernels' maximum of " + std::to_string(kMaxHeadDim));
  }
}

unsigned int blocks_for_rows(int64_t rows) {
  return static_cast<unsigned int>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
}

}  // namespace

void launch_attention_forward(cudaStream_t s, float* out, float* lse, const float* qkv,
                              const AttentionShape& shape) {
  check_shape(shape);
  const int64_t rows = static_cast<int64_t>(shape.B) * shape.n_head * shape.T;
  if (rows == 0) return;
  const float scale = 1.0f / std::sqrt(static_cast<float>(shape.head_dim));
  attention_forward_kernel<<<blocks_for_rows(rows), kWarpsPerBlock * 32, 0, s>>>(
      out, lse, qkv, geometry(shape), scale);
  TRAINCTL_CUDA_CHECK_LAUNCH(attention_forward_kernel);
}

void launch_attention_decode(cudaStream_t s, float* out, const float* q, const float* k_cache,
                             const float* v_cache, int len, int n_head, int n_kv_head,
                             int head_dim) {
  const AttentionShape shape{1, len, n_head, n_kv_head, head_dim};
  check_shape(shape);
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  attention_decode_kernel<<<blocks_for_rows(n_head), kWarpsPerBlock * 32, 0, s>>>(
      out, q, k_cache, v_cache, len, n_head, shape.group(), head_dim, shape.kv_width(), scale);
  TRAINCTL_CUDA_CHECK_LAUNCH(attention_decode_kernel);
}

void launch_attention_backward(cudaStream_t s, float* dqkv, const float* dout, const float* qkv,
                               const float* out, const float* lse, const AttentionShape& shape,
                               float* scratch) {
  check_shape(shape);
  const int64_t rows = static_cast<int64_t>(shape.B) * shape.n_head * shape.T;
  if (rows == 0) return;
  const int64_t kv_rows = static_cast<int64_t>(shape.B) * shape.n_kv_head * shape.T;
  const float scale = 1.0f / std::sqrt(static_cast<float>(shape.head_dim));
  const Geometry g = geometry(shape);
  const unsigned int blocks = blocks_for_rows(rows);
  constexpr int kThreads = kWarpsPerBlock * 32;
  attention_delta_kernel<<<blocks, kThreads, 0, s>>>(scratch, dout, out, g);
  TRAINCTL_CUDA_CHECK_LAUNCH(attention_delta_kernel);
  attention_dq_kernel<<<blocks, kThreads, 0, s>>>(dqkv, dout, qkv, lse, scratch, g, scale);
  TRAINCTL_CUDA_CHECK_LAUNCH(attention_dq_kernel);
  attention_dkdv_kernel<<<blocks_for_rows(kv_rows), kThreads, 0, s>>>(dqkv, dout, qkv, lse, scratch,
                                                                      g, scale);
  TRAINCTL_CUDA_CHECK_LAUNCH(attention_dkdv_kernel);
}

}  // namespace trainctl::ops::cuda
