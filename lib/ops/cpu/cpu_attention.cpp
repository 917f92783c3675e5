// Causal self-attention, flash-attention style on the CPU.
//
// Work is split over (batch, head) pairs, one pair per task (two OpenBLAS threads make
// these 64-wide products slower, NOTES.md). On CPUs with AVX-512 each pair runs the
// register-blocked kernels of attention_avx512.h: about 2x faster than the sgemm path, which
// pays call overhead and packing per small block and masks only at 64-key granularity.
//
// Elsewhere each pair runs single-threaded sgemm: queries are processed in blocks of
// kQueryBlock rows; a block only multiplies against keys 0..(last query of the block), so
// fully masked key blocks are never computed (about half the FLOPs of the full T x T
// product). Scores for one block live in a per-thread scratch of kQueryBlock x T floats;
// nothing T x T is ever kept.
//
// The heads are read in place from nanoGPT's qkv layout [B, T, 3C] through leading
// dimensions of 3C: q of head h is qkv[b, t, h*hs : (h+1)*hs], k at +C, v at +2C.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "ops/cpu/attention_avx512.h"
#include "ops/cpu/cpu_backend.h"
#include "ops/cpu/sgemm.h"
#include "ops/cpu/vec_math.h"

namespace trainctl::ops::cpu {

namespace {

constexpr int kQueryBlock = 64;

void check_shape(int T, int C, int NH) {
  if (NH <= 0 || C % NH != 0) {
    throw std::invalid_argument("attention: C=" + std::to_string(C) +
                                " is not divisible by NH=" + std::to_string(NH));
  }
  if (T <= 0) throw std::invalid_argument("attention: T must be positive");
}

// Turns row i of the scaled scores s[n, L] (query t = q0 + i sees keys 0..t) into
// probabilities in place; masked entries become exactly 0. Returns the row's log-sum-exp.
float softmax_causal_row(float* s, int valid, int L) {
  const float mx = max_of(s, valid);
  for (int j = 0; j < valid; ++j) s[j] = fast_exp(s[j] - mx);  // vectorises: no reduction
  const float sum = sum_of(s, valid);
  const float inv = 1.0f / sum;
  for (int j = 0; j < valid; ++j) s[j] *= inv;
  for (int j = valid; j < L; ++j) s[j] = 0.0f;
  return mx + std::log(sum);
}

}  // namespace

void CpuBackend::attention_forward(float* out, float* lse, const float* qkv, int B, int T, int C,
                                   int NH) {
  check_shape(T, C, NH);
  const int hs = C / NH;
  const int C3 = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  if (attention_avx512::supported()) {
    pool_.parallel_for(int64_t{B} * NH, 1, [&](int64_t p0, int64_t p1, int t) {
      float* s = scratch(t, attention_avx512::forward_scratch_floats(T, hs));
      for (int64_t pair = p0; pair < p1; ++pair) {
        const int64_t b = pair / NH;
        const int64_t head_off = (pair % NH) * hs;
        const float* q = qkv + b * T * C3 + head_off;
        attention_avx512::forward_head(out + b * T * C + head_off, C, lse + pair * T, q, q + C,
                                       q + 2 * C, C3, T, hs, scale, s);
      }
    });
    return;
  }
  pool_.parallel_for(int64_t{B} * NH, 1, [&](int64_t p0, int64_t p1, int t) {
    float* s = scratch(t, static_cast<size_t>(kQueryBlock) * T);
    for (int64_t pair = p0; pair < p1; ++pair) {
      const int64_t b = pair / NH;
      const int h = static_cast<int>(pair % NH);
      const float* base = qkv + b * T * C3 + int64_t{h} * hs;
      const float* k = base + C;
      const float* v = base + 2 * C;
      float* row_lse = lse + pair * T;
      for (int q0 = 0; q0 < T; q0 += kQueryBlock) {
        const int n = std::min(kQueryBlock, T - q0);
        const int L = q0 + n;  // keys 0..L-1 are visible to some query of this block
        sgemm_serial(false, true, n, L, hs, scale, base + int64_t{q0} * C3, C3, k, C3, 0.0f, s, L);
        for (int i = 0; i < n; ++i) {
          row_lse[q0 + i] = softmax_causal_row(s + int64_t{i} * L, q0 + i + 1, L);
        }
        sgemm_serial(false, false, n, hs, L, 1.0f, s, L, v, C3, 0.0f,
                     out + (b * T + q0) * C + int64_t{h} * hs, C);
      }
    }
  });
}

void CpuBackend::attention_backward(float* dqkv, const float* dout, const float* qkv,
                                    const float* out, const float* lse, int B, int T, int C,
                                    int NH) {
  check_shape(T, C, NH);
  const int hs = C / NH;
  const int C3 = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  if (attention_avx512::supported()) {
    pool_.parallel_for(int64_t{B} * NH, 1, [&](int64_t p0, int64_t p1, int t) {
      float* s = scratch(t, attention_avx512::backward_scratch_floats(T, hs));
      for (int64_t pair = p0; pair < p1; ++pair) {
        const int64_t b = pair / NH;
        const int64_t head_off = (pair % NH) * hs;
        const float* q = qkv + b * T * C3 + head_off;
        float* dq = dqkv + b * T * C3 + head_off;
        attention_avx512::backward_head(dq, dq + C, dq + 2 * C, dout + b * T * C + head_off,
                                        out + b * T * C + head_off, C, q, q + C, q + 2 * C, C3,
                                        lse + pair * T, T, hs, scale, s);
      }
    });
    return;
  }
  pool_.parallel_for(int64_t{B} * NH, 1, [&](int64_t p0, int64_t p1, int t) {
    float* p = scratch(t, 2 * static_cast<size_t>(kQueryBlock) * T);
    float* dp = p + static_cast<size_t>(kQueryBlock) * T;
    for (int64_t pair = p0; pair < p1; ++pair) {
      const int64_t b = pair / NH;
      const int h = static_cast<int>(pair % NH);
      const int64_t head_off = int64_t{h} * hs;
      const float* q = qkv + b * T * C3 + head_off;
      const float* k = q + C;
      const float* v = q + 2 * C;
      float* dq = dqkv + b * T * C3 + head_off;
      float* dk = dq + C;
      float* dv = dq + 2 * C;
      const float* row_lse = lse + pair * T;
      // Last block first: it sees every key, so it initialises dK and dV (beta = 0) and
      // the earlier blocks accumulate onto them.
      const int last_q0 = (T - 1) / kQueryBlock * kQueryBlock;
      for (int q0 = last_q0; q0 >= 0; q0 -= kQueryBlock) {
        const int n = std::min(kQueryBlock, T - q0);
        const int L = q0 + n;
        const float beta = q0 == last_q0 ? 0.0f : 1.0f;
        const float* q_blk = q + int64_t{q0} * C3;
        const float* do_blk = dout + (b * T + q0) * C + head_off;
        const float* o_blk = out + (b * T + q0) * C + head_off;
        // P = exp(scale Q K^T - lse), recomputed from the forward's saved log-sum-exp.
        sgemm_serial(false, true, n, L, hs, scale, q_blk, C3, k, C3, 0.0f, p, L);
        for (int i = 0; i < n; ++i) {
          float* pr = p + int64_t{i} * L;
          const int valid = q0 + i + 1;
          const float m = row_lse[q0 + i];
          for (int j = 0; j < valid; ++j) pr[j] = fast_exp(pr[j] - m);
          for (int j = valid; j < L; ++j) pr[j] = 0.0f;
        }
        // dV += P^T dO
        sgemm_serial(true, false, L, hs, n, 1.0f, p, L, do_blk, C, beta, dv, C3);
        // dP = dO V^T
        sgemm_serial(false, true, n, L, hs, 1.0f, do_blk, C, v, C3, 0.0f, dp, L);
        // dS = P * (dP - rowsum(dO * O)), written over dP
        for (int i = 0; i < n; ++i) {
          const float* dor = do_blk + int64_t{i} * C;
          const float* orow = o_blk + int64_t{i} * C;
          const float d = dot_of(dor, orow, hs);
          const float* pr = p + int64_t{i} * L;
          float* ds = dp + int64_t{i} * L;
          for (int j = 0; j < L; ++j) ds[j] = pr[j] * (ds[j] - d);
        }
        // dQ = scale dS K (complete for this block), dK += scale dS^T Q
        sgemm_serial(false, false, n, hs, L, scale, dp, L, k, C3, 0.0f, dq + int64_t{q0} * C3, C3);
        sgemm_serial(true, false, L, hs, n, scale, dp, L, q_blk, C3, beta, dk, C3);
      }
    }
  });
}

}  // namespace trainctl::ops::cpu
