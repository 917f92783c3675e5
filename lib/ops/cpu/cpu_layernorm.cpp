// LayerNorm over the last dimension, PyTorch semantics (biased variance, eps 1e-5).
// One pass over memory per row: a row (C floats) stays in L1 between the statistics and
// the normalisation, so reading it twice costs nothing extra.
#include <cmath>

#include "ops/cpu/cpu_backend.h"
#include "ops/cpu/vec_math.h"

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
      const float m = sum_of(x, C) / static_cast<float>(C);
      const float s = 1.0f / std::sqrt(sum_sq_dev(x, m, C) / static_cast<float>(C) + kLayerNormEps);
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
      // Lane accumulators (see vec_math.h) so this loop vectorises.
      float lane_dnorm[kLanes] = {};
      float lane_dnorm_xhat[kLanes] = {};
      int i = 0;
      for (; i + kLanes <= C; i += kLanes) {
        for (int k = 0; k < kLanes; ++k) {
          const float xhat = (x[i + k] - m) * s;
          const float dnorm = g[i + k] * weight[i + k];
          lane_dnorm[k] += dnorm;
          lane_dnorm_xhat[k] += dnorm * xhat;
          dw[i + k] += g[i + k] * xhat;
          db[i + k] += g[i + k];
        }
      }
      for (; i < C; ++i) {
        const float xhat = (x[i] - m) * s;
        const float dnorm = g[i] * weight[i];
        lane_dnorm[i % kLanes] += dnorm;
        lane_dnorm_xhat[i % kLanes] += dnorm * xhat;
        dw[i] += g[i] * xhat;
        db[i] += g[i];
      }
      const float sum_dnorm = reduce_lanes(lane_dnorm);
      const float sum_dnorm_xhat = reduce_lanes(lane_dnorm_xhat);
      const float mean_dnorm = sum_dnorm / static_cast<float>(C);
      const float mean_dnorm_xhat = sum_dnorm_xhat / static_cast<float>(C);
      for (i = 0; i < C; ++i) {
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
