// Causal self-attention, flash-attention style on the CPU: work is split over (batch, head)
// pairs, one pair per task (two OpenBLAS threads make these 64-wide products slower,
// NOTES.md), and each pair runs this instruction set's per-head kernel (cpu_kernels.h):
// register-blocked tiles on AVX2 and AVX-512, single-threaded sgemm elsewhere.
//
// The heads are read in place from nanoGPT's qkv layout [B, T, 3C] through leading
// dimensions of 3C: q of head h is qkv[b, t, h*hs : (h+1)*hs], k at +C, v at +2C.
#include <cmath>
#include <stdexcept>
#include <string>

#include "ops/cpu/cpu_backend.h"

namespace trainctl::ops::cpu {

namespace {

// Grouped-query attention is not in the CPU kernels yet: its backward must sum the k/v
// gradients of the query heads that share a head.
void require_multi_head(const AttentionShape& s) {
  s.check();
  if (s.n_kv_head != s.n_head) {
    throw std::invalid_argument("attention: the CPU backend needs n_kv_head == n_head");
  }
}

}  // namespace

void CpuBackend::attention_forward(float* out, float* lse, const float* qkv,
                                   const AttentionShape& shape) {
  require_multi_head(shape);
  const int B = shape.B, T = shape.T, NH = shape.n_head, hs = shape.head_dim;
  const int C = shape.q_width();
  const int C3 = shape.qkv_width();
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  pool_.parallel_for(int64_t{B} * NH, 1, [&](int64_t p0, int64_t p1, int t) {
    float* s = scratch(t, kernels_.attention_forward_scratch_floats(T, hs));
    for (int64_t pair = p0; pair < p1; ++pair) {
      const int64_t b = pair / NH;
      const int64_t head_off = (pair % NH) * hs;
      const float* q = qkv + b * T * C3 + head_off;
      kernels_.attention_forward_head(out + b * T * C + head_off, C, lse + pair * T, q, q + C,
                                      q + 2 * C, C3, T, hs, scale, s);
    }
  });
}

void CpuBackend::attention_backward(float* dqkv, const float* dout, const float* qkv,
                                    const float* out, const float* lse,
                                    const AttentionShape& shape) {
  require_multi_head(shape);
  const int B = shape.B, T = shape.T, NH = shape.n_head, hs = shape.head_dim;
  const int C = shape.q_width();
  const int C3 = shape.qkv_width();
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  pool_.parallel_for(int64_t{B} * NH, 1, [&](int64_t p0, int64_t p1, int t) {
    float* s = scratch(t, kernels_.attention_backward_scratch_floats(T, hs));
    for (int64_t pair = p0; pair < p1; ++pair) {
      const int64_t b = pair / NH;
      const int64_t head_off = (pair % NH) * hs;
      const float* q = qkv + b * T * C3 + head_off;
      float* dq = dqkv + b * T * C3 + head_off;
      kernels_.attention_backward_head(dq, dq + C, dq + 2 * C, dout + b * T * C + head_off,
                                       out + b * T * C + head_off, C, q, q + C, q + 2 * C, C3,
                                       lse + pair * T, T, hs, scale, s);
    }
  });
}

}  // namespace trainctl::ops::cpu
