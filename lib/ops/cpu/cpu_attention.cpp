// Causal self-attention, flash-attention style on the CPU: work is split over (batch, k/v
// head) pairs, one pair per task (two OpenBLAS threads make these 64-wide products slower,
// NOTES.md), and each query head runs this instruction set's per-head kernel
// (cpu_kernels.h): register-blocked tiles on AVX2 and AVX-512, single-threaded sgemm
// elsewhere.
//
// Heads are read in place from the fused qkv layout [B, T, (n_head + 2 n_kv_head) hs]
// through leading dimensions of qkv_width: q of head h at h*hs, its k and v (k/v head
// h / group) at q_width + (h / group)*hs and q_width + kv_width + (h / group)*hs.
#include <algorithm>
#include <cmath>

#include "ops/cpu/cpu_backend.h"

namespace trainctl::ops::cpu {

void CpuBackend::attention_forward(float* out, float* lse, const float* qkv,
                                   const AttentionShape& shape) {
  shape.check();
  const int B = shape.B, T = shape.T, NH = shape.n_head, hs = shape.head_dim;
  const int group = shape.group();
  const int64_t C = shape.q_width(), KV = shape.kv_width(), C3 = shape.qkv_width();
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  pool_.parallel_for(int64_t{B} * NH, 1, [&](int64_t p0, int64_t p1, int t) {
    float* s = scratch(t, kernels_.attention_forward_scratch_floats(T, hs));
    for (int64_t pair = p0; pair < p1; ++pair) {
      const int64_t b = pair / NH, h = pair % NH;
      const float* row = qkv + b * T * C3;
      const float* k = row + C + (h / group) * hs;
      kernels_.attention_forward_head(out + b * T * C + h * hs, static_cast<int>(C), lse + pair * T,
                                      row + h * hs, k, k + KV, static_cast<int>(C3), T, hs, scale,
                                      s);
    }
  });
}

void CpuBackend::attention_decode(float* out, const float* q, const float* k_cache,
                                  const float* v_cache, int len, int n_head, int n_kv_head,
                                  int head_dim) {
  AttentionShape{1, len, n_head, n_kv_head, head_dim}.check();
  const int group = n_head / n_kv_head, hd = head_dim;
  const size_t kv_width = static_cast<size_t>(n_kv_head) * hd;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  pool_.parallel_for(n_head, 1, [&](int64_t h0, int64_t h1, int t) {
    float* att = scratch(t, static_cast<size_t>(len));
    for (int64_t head = h0; head < h1; ++head) {
      const float* qh = q + head * hd;
      const size_t kv_off = static_cast<size_t>(head / group) * hd;
      float max_score = -INFINITY;
      for (int j = 0; j < len; ++j) {
        const float* k = k_cache + static_cast<size_t>(j) * kv_width + kv_off;
        float dot = 0.0f;
        for (int d = 0; d < hd; ++d) dot += qh[d] * k[d];
        att[j] = dot * scale;
        max_score = std::max(max_score, att[j]);
      }
      double sum = 0.0;
      for (int j = 0; j < len; ++j) {
        att[j] = std::exp(att[j] - max_score);
        sum += att[j];
      }
      float* o = out + head * hd;
      std::fill_n(o, hd, 0.0f);
      for (int j = 0; j < len; ++j) {
        const float p = static_cast<float>(att[j] / sum);
        const float* v = v_cache + static_cast<size_t>(j) * kv_width + kv_off;
        for (int d = 0; d < hd; ++d) o[d] += p * v[d];
      }
    }
  });
}

namespace {

// Copies `rows` rows of hs floats between strided and packed layouts.
void copy_rows(float* dst, int64_t ld_dst, const float* src, int64_t ld_src, int rows, int hs) {
  for (int r = 0; r < rows; ++r) std::copy_n(src + r * ld_src, hs, dst + r * ld_dst);
}

void add_rows(float* dst, int64_t ld_dst, const float* src, int64_t ld_src, int rows, int hs) {
  for (int r = 0; r < rows; ++r) {
    float* d = dst + r * ld_dst;
    const float* x = src + r * ld_src;
    for (int i = 0; i < hs; ++i) d[i] += x[i];
  }
}

}  // namespace

void CpuBackend::attention_backward(float* dqkv, const float* dout, const float* qkv,
                                    const float* out, const float* lse,
                                    const AttentionShape& shape) {
  shape.check();
  const int B = shape.B, T = shape.T, NH = shape.n_head, NKV = shape.n_kv_head;
  const int hs = shape.head_dim, group = shape.group();
  const int64_t C = shape.q_width(), KV = shape.kv_width(), C3 = shape.qkv_width();
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const size_t kernel_floats = kernels_.attention_backward_scratch_floats(T, hs);
  // One task per (batch, k/v head): the group's query heads run one after another in the
  // same task, so the shared k/v gradient is summed in a fixed order without races. With
  // group > 1 each head runs on packed copies ([T, 3hs]: q | k | v) so its k/v gradient
  // lands in private rows that are then added to the shared ones.
  const size_t packed = group > 1 ? 2 * size_t{3} * static_cast<size_t>(T) * hs : 0;
  pool_.parallel_for(int64_t{B} * NKV, 1, [&](int64_t p0, int64_t p1, int t) {
    float* s = scratch(t, kernel_floats + packed);
    float* in = s + kernel_floats;                               // packed q | k | v
    float* grad = in + size_t{3} * static_cast<size_t>(T) * hs;  // packed dq | dk | dv
    const int64_t ld = 3 * int64_t{hs};
    for (int64_t pair = p0; pair < p1; ++pair) {
      const int64_t b = pair / NKV, g = pair % NKV;
      const float* row = qkv + b * T * C3;
      float* drow = dqkv + b * T * C3;
      const float* k = row + C + g * hs;
      float* dk = drow + C + g * hs;
      if (group == 1) {
        kernels_.attention_backward_head(drow + g * hs, dk, dk + KV, dout + b * T * C + g * hs,
                                         out + b * T * C + g * hs, static_cast<int>(C),
                                         row + g * hs, k, k + KV, static_cast<int>(C3),
                                         lse + (b * NH + g) * T, T, hs, scale, s);
        continue;
      }
      copy_rows(in + hs, ld, k, C3, T, hs);
      copy_rows(in + 2 * hs, ld, k + KV, C3, T, hs);
      for (int j = 0; j < group; ++j) {
        const int64_t h = g * group + j;
        copy_rows(in, ld, row + h * hs, C3, T, hs);
        kernels_.attention_backward_head(grad, grad + hs, grad + 2 * hs, dout + b * T * C + h * hs,
                                         out + b * T * C + h * hs, static_cast<int>(C), in, in + hs,
                                         in + 2 * hs, static_cast<int>(ld), lse + (b * NH + h) * T,
                                         T, hs, scale, s);
        copy_rows(drow + h * hs, C3, grad, ld, T, hs);
        if (j == 0) {
          copy_rows(dk, C3, grad + hs, ld, T, hs);
          copy_rows(dk + KV, C3, grad + 2 * hs, ld, T, hs);
        } else {
          add_rows(dk, C3, grad + hs, ld, T, hs);
          add_rows(dk + KV, C3, grad + 2 * hs, ld, T, hs);
        }
      }
    }
  });
}

}  // namespace trainctl::ops::cpu
