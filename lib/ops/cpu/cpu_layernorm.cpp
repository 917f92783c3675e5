// LayerNorm over the last dimension, PyTorch semantics (biased variance, eps 1e-5).
// One pass over memory per row: a row (C floats) stays in L1 between the statistics and
// the normalisation, so reading it twice costs nothing extra.
#include <cmath>

#include "ops/cpu/cpu_backend.h"

namespace trainctl::ops::cpu {

namespace {
constexpr float kLayerNormEps = 1e-5f;

int64_t rows_grain(int C) { return std::max<int64_t>(1, kElementwiseGrain / std::max(1, C)); }
}  // namespace

void CpuBackend::layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                                   const float* weight, const float* bias, int N, int C) {
  pool_.parallel_for(N, rows_grain(C), [&](int64_t r0, int64_t r1, int) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* x = inp + r * C;
      float* o = out + r * C;
      float sum = 0.0f;
      for (int i = 0; i < C; ++i) sum += x[i];
      const float m = sum / static_cast<float>(C);
      float sq = 0.0f;
      for (int i = 0; i < C; ++i) {
        const float d = x[i] - m;
        sq += d * d;
      }
      const float s = 1.0f / std::sqrt(sq / static_cast<float>(C) + kLayerNormEps);
      for (int i = 0; i < C; ++i) o[i] = (x[i] - m) * s * weight[i] + bias[i];
      mean[r] = m;
      rstd[r] = s;
    }
  });
}

void CpuBackend::layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                                    const float* inp, const float* weight, const float* mean,
                                    const float* rstd, int N, int C) {
  // Parameter gradients are summed per thread (fixed row ranges, so the order is fixed)
  // and then added in thread order: deterministic for a given thread count.
  std::vector<float*> partials(static_cast<size_t>(pool_.size()), nullptr);
  pool_.parallel_for(N, rows_grain(C), [&](int64_t r0, int64_t r1, int t) {
    float* dw = scratch(t, 2 * static_cast<size_t>(C));
    float* db = dw + C;
    for (int i = 0; i < 2 * C; ++i) dw[i] = 0.0f;
    partials[static_cast<size_t>(t)] = dw;
    for (int64_t r = r0; r < r1; ++r) {
      const float* x = inp + r * C;
      const float* g = dout + r * C;
      float* dx = dinp + r * C;
      const float m = mean[r];
      const float s = rstd[r];
      // dnorm = g * w; dx = s * (dnorm - mean(dnorm) - xhat * mean(dnorm * xhat))
      float sum_dnorm = 0.0f;
      float sum_dnorm_xhat = 0.0f;
      for (int i = 0; i < C; ++i) {
        const float xhat = (x[i] - m) * s;
        const float dnorm = g[i] * weight[i];
        sum_dnorm += dnorm;
        sum_dnorm_xhat += dnorm * xhat;
        dw[i] += g[i] * xhat;
        db[i] += g[i];
      }
      const float mean_dnorm = sum_dnorm / static_cast<float>(C);
      const float mean_dnorm_xhat = sum_dnorm_xhat / static_cast<float>(C);
      for (int i = 0; i < C; ++i) {
        const float xhat = (x[i] - m) * s;
        dx[i] = s * (g[i] * weight[i] - mean_dnorm - xhat * mean_dnorm_xhat);
      }
    }
  });
  for (float* p : partials) {
    if (p == nullptr) continue;
    for (int i = 0; i < C; ++i) {
      dweight[i] += p[i];
      dbias[i] += p[C + i];
    }
  }
}

}  // namespace trainctl::ops::cpu
