// Causal attention of one (batch, head) pair through single-threaded sgemm: the path for
// CPUs without AVX2 (and the `generic` choice everywhere). cpu_kernels.h has the contract.
//
// Queries are processed in blocks of kQueryBlock rows; a block only multiplies against
// keys 0..(last query of the block), so fully masked key blocks are never computed (about
// half the FLOPs of the full T x T product). Scores for one block live in the scratch
// (kQueryBlock x T floats); nothing T x T is ever kept.
#include <algorithm>

#include "ops/cpu/kernels/parts.h"
#include "ops/cpu/sgemm.h"
#include "ops/cpu/vec_math.h"

namespace trainctl::ops::cpu::TRAINCTL_ISA {

namespace {

constexpr int kQueryBlock = 64;

// Turns the scaled scores s[0, L) of a query that sees keys 0..valid-1 into
// probabilities in place; masked entries become exactly 0. Returns the log-sum-exp.
float softmax_causal_row(float* s, int valid, int L) {
  const float mx = max_of(s, valid);
  for (int j = 0; j < valid; ++j) s[j] = fast_exp(s[j] - mx);  // vectorises: no reduction
  const float sum = sum_of(s, valid);
  const float inv = 1.0f / sum;
  for (int j = 0; j < valid; ++j) s[j] *= inv;
  for (int j = valid; j < L; ++j) s[j] = 0.0f;
  return mx + __builtin_logf(sum);
}

}  // namespace

size_t attention_forward_scratch_floats(int T, int) {
  return static_cast<size_t>(kQueryBlock) * static_cast<size_t>(T);
}

size_t attention_backward_scratch_floats(int T, int) {
  return 2 * static_cast<size_t>(kQueryBlock) * static_cast<size_t>(T);
}

void attention_forward_head(float* out, int ldo, float* lse, const float* q, const float* k,
                            const float* v, int ld, int T, int hs, float scale, float* s) {
  for (int q0 = 0; q0 < T; q0 += kQueryBlock) {
    const int n = std::min(kQueryBlock, T - q0);
    const int L = q0 + n;  // keys 0..L-1 are visible to some query of this block
    sgemm_serial(false, true, n, L, hs, scale, q + int64_t{q0} * ld, ld, k, ld, 0.0f, s, L);
    for (int i = 0; i < n; ++i) lse[q0 + i] = softmax_causal_row(s + int64_t{i} * L, q0 + i + 1, L);
    sgemm_serial(false, false, n, hs, L, 1.0f, s, L, v, ld, 0.0f, out + int64_t{q0} * ldo, ldo);
  }
}

void attention_backward_head(float* dq, float* dk, float* dv, const float* dout, const float* out,
                             int ldo, const float* q, const float* k, const float* v, int ld,
                             const float* lse, int T, int hs, float scale, float* scratch) {
  float* p = scratch;
  float* dp = p + static_cast<size_t>(kQueryBlock) * T;
  // Last block first: it sees every key, so it initialises dK and dV (beta = 0) and the
  // earlier blocks accumulate onto them.
  const int last_q0 = (T - 1) / kQueryBlock * kQueryBlock;
  for (int q0 = last_q0; q0 >= 0; q0 -= kQueryBlock) {
    const int n = std::min(kQueryBlock, T - q0);
    const int L = q0 + n;
    const float beta = q0 == last_q0 ? 0.0f : 1.0f;
    const float* q_blk = q + int64_t{q0} * ld;
    const float* do_blk = dout + int64_t{q0} * ldo;
    const float* o_blk = out + int64_t{q0} * ldo;
    // P = exp(scale Q K^T - lse), recomputed from the forward's saved log-sum-exp.
    sgemm_serial(false, true, n, L, hs, scale, q_blk, ld, k, ld, 0.0f, p, L);
    for (int i = 0; i < n; ++i) {
      float* pr = p + int64_t{i} * L;
      const int valid = q0 + i + 1;
      const float m = lse[q0 + i];
      for (int j = 0; j < valid; ++j) pr[j] = fast_exp(pr[j] - m);
      for (int j = valid; j < L; ++j) pr[j] = 0.0f;
    }
    // dV += P^T dO
    sgemm_serial(true, false, L, hs, n, 1.0f, p, L, do_blk, ldo, beta, dv, ld);
    // dP = dO V^T
    sgemm_serial(false, true, n, L, hs, 1.0f, do_blk, ldo, v, ld, 0.0f, dp, L);
    // dS = P * (dP - rowsum(dO * O)), written over dP
    for (int i = 0; i < n; ++i) {
      const float d = dot_of(do_blk + int64_t{i} * ldo, o_blk + int64_t{i} * ldo, hs);
      const float* pr = p + int64_t{i} * L;
      float* ds = dp + int64_t{i} * L;
      for (int j = 0; j < L; ++j) ds[j] = pr[j] * (ds[j] - d);
    }
    // dQ = scale dS K (complete for this block), dK += scale dS^T Q
    sgemm_serial(false, false, n, hs, L, scale, dp, L, k, ld, 0.0f, dq + int64_t{q0} * ld, ld);
    sgemm_serial(true, false, L, hs, n, scale, dp, L, q_blk, ld, beta, dk, ld);
  }
}

}  // namespace trainctl::ops::cpu::TRAINCTL_ISA
