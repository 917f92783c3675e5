#pragma once
// A naive causal grouped-query attention in double precision, written straight from the
// definition (scores, softmax, weighted sum; backward through the softmax), to check the
// CUDA kernels where the CPU backend has no grouped-query attention to compare with.
// Layout and semantics are Backend::attention_forward/backward's (ops/backend.h).
#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/backend.h"

namespace trainctl::gpu_test {

struct GqaReference {
  std::vector<float> out;   // [B, T, q_width]
  std::vector<float> lse;   // [B, n_head, T]
  std::vector<float> dqkv;  // [B, T, qkv_width]
};

// Forward from qkv; backward from dout (the gradient of `out`).
inline GqaReference gqa_reference(const std::vector<float>& qkv, const std::vector<float>& dout,
                                  const ops::AttentionShape& s) {
  const int W = s.qkv_width(), OW = s.q_width(), hs = s.head_dim;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  GqaReference r;
  r.out.assign(static_cast<size_t>(s.B) * s.T * OW, 0.0f);
  r.lse.assign(static_cast<size_t>(s.B) * s.n_head * s.T, 0.0f);
  std::vector<double> dqkv(static_cast<size_t>(s.B) * s.T * W, 0.0);
  std::vector<double> score(static_cast<size_t>(s.T)), p(static_cast<size_t>(s.T));
  for (int b = 0; b < s.B; ++b) {
    for (int h = 0; h < s.n_head; ++h) {
      const int kh = h / s.group();
      const size_t q_off = static_cast<size_t>(h) * hs;
      const size_t k_off = static_cast<size_t>(s.q_width()) + static_cast<size_t>(kh) * hs;
      const size_t v_off = k_off + static_cast<size_t>(s.kv_width());
      auto at = [&](int t, size_t off) { return static_cast<size_t>(b * s.T + t) * W + off; };
      for (int t = 0; t < s.T; ++t) {
        double m = -INFINITY;
        for (int j = 0; j <= t; ++j) {
          double dot = 0.0;
          for (int d = 0; d < hs; ++d) dot += double{qkv[at(t, q_off) + d]} * qkv[at(j, k_off) + d];
          score[j] = dot * scale;
          m = std::max(m, score[j]);
        }
        double l = 0.0;
        for (int j = 0; j <= t; ++j) l += std::exp(score[j] - m);
        const double lse = m + std::log(l);
        r.lse[static_cast<size_t>((b * s.n_head + h) * s.T + t)] = static_cast<float>(lse);
        for (int j = 0; j <= t; ++j) p[j] = std::exp(score[j] - lse);
        const size_t o = static_cast<size_t>(b * s.T + t) * OW + q_off;
        for (int d = 0; d < hs; ++d) {
          double acc = 0.0;
          for (int j = 0; j <= t; ++j) acc += p[j] * qkv[at(j, v_off) + d];
          r.out[o + d] = static_cast<float>(acc);
        }
        // Backward: dP_j = dout . v_j, dS_j = P_j (dP_j - sum_i P_i dP_i).
        std::vector<double> dp(static_cast<size_t>(t) + 1);
        double delta = 0.0;
        for (int j = 0; j <= t; ++j) {
          double dot = 0.0;
          for (int d = 0; d < hs; ++d) dot += double{dout[o + d]} * qkv[at(j, v_off) + d];
          dp[j] = dot;
          delta += p[j] * dot;
        }
        for (int j = 0; j <= t; ++j) {
          const double ds = p[j] * (dp[j] - delta) * scale;
          for (int d = 0; d < hs; ++d) {
            dqkv[at(t, q_off) + d] += ds * qkv[at(j, k_off) + d];
            dqkv[at(j, k_off) + d] += ds * qkv[at(t, q_off) + d];
            dqkv[at(j, v_off) + d] += p[j] * dout[o + d];
          }
        }
      }
    }
  }
  r.dqkv.assign(dqkv.begin(), dqkv.end());
  return r;
}

// qkv of a grouped-query shape rewritten for multi-head attention: every k/v head copied
// for each query head of its group (what grouped-query attention computes, by definition).
inline std::vector<float> expand_kv_heads(const std::vector<float>& qkv,
                                          const ops::AttentionShape& s) {
  const int hs = s.head_dim, W = s.qkv_width(), C = s.q_width();
  std::vector<float> wide(static_cast<size_t>(s.B) * s.T * 3 * C);
  for (size_t row = 0; row < static_cast<size_t>(s.B) * s.T; ++row) {
    const float* src = qkv.data() + row * W;
    float* dst = wide.data() + row * 3 * C;
    std::copy(src, src + C, dst);
    for (int h = 0; h < s.n_head; ++h) {
      const int kh = h / s.group();
      std::copy_n(src + C + kh * hs, hs, dst + C + h * hs);
      std::copy_n(src + C + s.kv_width() + kh * hs, hs, dst + 2 * C + h * hs);
    }
  }
  return wide;
}

}  // namespace trainctl::gpu_test
