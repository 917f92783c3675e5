#include "model/attention_blocks.h"

#include <algorithm>
#include <cmath>
#include <limits>

// Ring attention runs on the CPU backend only (validate refuses cp with device: cuda); its
// softmax loops use the CPU kernels' vectorisable exp and lane reductions (glibc's expf
// and a plain running sum stay scalar, and were a third of the ring's time).
#include "ops/cpu/vec_math.h"

namespace trainctl::model {

namespace {

// Query rows per tile: bounds the scratch to kTile x nk scores whatever the block length.
constexpr int kTile = 128;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

using ops::cpu::fast_exp;

// Keys visible to query row i of a block (0 .. nk). It grows with i, so a tile of rows
// i0 .. i0 + rows - 1 needs only the first visible_keys(b, i0 + rows - 1) keys: the
// products of a diagonal block skip the keys no row of the tile sees.
int visible_keys(const HeadBlock& b, int i) {
  return std::clamp(b.qpos0 + i - b.kpos0 + 1, 0, b.nk);
}

}  // namespace

int64_t head_block_scratch_floats(int nk, int head_dim) {
  return int64_t{kTile} * nk * 2 + int64_t{kTile} * head_dim + kTile;
}

void merge_attention_partial(float* o, int ldo, float* lse, const float* o_part, int ld_part,
                             const float* lse_part, int rows, int head_dim) {
  for (int i = 0; i < rows; ++i) {
    const float lp = lse_part[i];
    if (lp == kNegInf) continue;  // nothing visible in this block
    const float l0 = lse[i];
    const float m = std::max(l0, lp);
    const float merged = m + std::log(std::exp(l0 - m) + std::exp(lp - m));
    const float a = l0 == kNegInf ? 0.0f : std::exp(l0 - merged);
    const float c = std::exp(lp - merged);
    float* oi = o + static_cast<int64_t>(i) * ldo;
    const float* pi = o_part + static_cast<int64_t>(i) * ld_part;
    for (int d = 0; d < head_dim; ++d) oi[d] = oi[d] * a + pi[d] * c;
    lse[i] = merged;
  }
}

void head_block_forward(ops::Backend& be, const HeadBlock& b, float* out, int ldo, float* lse,
                        float* scratch) {
  if (b.masked_out()) return;
  const float scale = 1.0f / std::sqrt(static_cast<float>(b.head_dim));
  float* s = scratch;                                      // [tile, nk] scores, then probabilities
  float* o_part = s + int64_t{kTile} * b.nk * 2;           // [tile, head_dim]
  float* lse_part = o_part + int64_t{kTile} * b.head_dim;  // [tile]
  for (int i0 = 0; i0 < b.nq; i0 += kTile) {
    const int rows = std::min(kTile, b.nq - i0);
    const int nk = visible_keys(b, i0 + rows - 1);
    if (nk == 0) continue;  // no row of the tile sees a key of the block: nothing to merge
    const float* q = b.q + static_cast<int64_t>(i0) * b.ldq;
    be.gemm_fp32(false, true, rows, nk, b.head_dim, scale, q, b.ldq, b.k, b.ldkv, 0.0f, s, b.nk);
    for (int i = 0; i < rows; ++i) {
      float* si = s + static_cast<int64_t>(i) * b.nk;
      const int n = visible_keys(b, i0 + i);
      if (n == 0) {
        std::fill(si, si + nk, 0.0f);
        lse_part[i] = kNegInf;
        continue;
      }
      const float m = ops::cpu::max_of(si, n);
      for (int j = 0; j < n; ++j) si[j] = fast_exp(si[j] - m);
      const float sum = ops::cpu::sum_of(si, n);
      const float inv = 1.0f / sum;
      for (int j = 0; j < n; ++j) si[j] *= inv;
      std::fill(si + n, si + nk, 0.0f);
      lse_part[i] = m + std::log(sum);
    }
    be.gemm_fp32(false, false, rows, b.head_dim, nk, 1.0f, s, b.nk, b.v, b.ldkv, 0.0f, o_part,
                 b.head_dim);
    merge_attention_partial(out + static_cast<int64_t>(i0) * ldo, ldo, lse + i0, o_part, b.head_dim,
                            lse_part, rows, b.head_dim);
  }
}

void head_block_backward(ops::Backend& be, const HeadBlock& b, const float* dout, int ldo,
                         const float* lse, const float* delta, float* dq, int lddq, float* dk,
                         float* dv, int lddkv, float* scratch) {
  if (b.masked_out()) return;
  const float scale = 1.0f / std::sqrt(static_cast<float>(b.head_dim));
  float* p = scratch;                     // [tile, nk] probabilities
  float* dp = p + int64_t{kTile} * b.nk;  // [tile, nk] their gradient, then dS
  for (int i0 = 0; i0 < b.nq; i0 += kTile) {
    const int rows = std::min(kTile, b.nq - i0);
    const int nk = visible_keys(b, i0 + rows - 1);
    if (nk == 0) continue;  // the tile's probabilities in this block are all 0
    const float* q = b.q + static_cast<int64_t>(i0) * b.ldq;
    const float* dO = dout + static_cast<int64_t>(i0) * ldo;
    be.gemm_fp32(false, true, rows, nk, b.head_dim, scale, q, b.ldq, b.k, b.ldkv, 0.0f, p, b.nk);
    for (int i = 0; i < rows; ++i) {
      float* pi = p + static_cast<int64_t>(i) * b.nk;
      const int n = visible_keys(b, i0 + i);
      const float l = lse[i0 + i];
      for (int j = 0; j < n; ++j) pi[j] = fast_exp(pi[j] - l);
      std::fill(pi + n, pi + nk, 0.0f);
    }
    // dV += P^T dO; dP = dO V^T; dS = P (dP - delta) scale; dQ += dS K; dK += dS^T Q.
    be.gemm_fp32(true, false, nk, b.head_dim, rows, 1.0f, p, b.nk, dO, ldo, 1.0f, dv, lddkv);
    be.gemm_fp32(false, true, rows, nk, b.head_dim, 1.0f, dO, ldo, b.v, b.ldkv, 0.0f, dp, b.nk);
    for (int i = 0; i < rows; ++i) {
      const float* pi = p + static_cast<int64_t>(i) * b.nk;
      float* di = dp + static_cast<int64_t>(i) * b.nk;
      const float d = delta[i0 + i];
      for (int j = 0; j < nk; ++j) di[j] = pi[j] * (di[j] - d) * scale;
    }
    be.gemm_fp32(false, false, rows, b.head_dim, nk, 1.0f, dp, b.nk, b.k, b.ldkv, 1.0f,
                 dq + static_cast<int64_t>(i0) * lddq, lddq);
    be.gemm_fp32(true, false, nk, b.head_dim, rows, 1.0f, dp, b.nk, q, b.ldq, 1.0f, dk, lddkv);
  }
}

}  // namespace trainctl::model
