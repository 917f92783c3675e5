// AdamW in one pass over (param, grad, m, v), with PyTorch's operation order
// (torch.optim.AdamW, foreach=False):
//   p *= 1 - lr*wd;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
//   p -= (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
// The loop is written with AVX intrinsics where available: without -ffast-math the
// compiler keeps sqrtf scalar (errno), and this op is meant to run at memory speed. The
// vector and scalar paths do the same correctly rounded operations in the same order, so
// results do not depend on which elements fall in the tail.
#include <cmath>
#include <stdexcept>
#include <string>

#include "ops/cpu/cpu_backend.h"
#include "ops/shared_math.h"

#if defined(__AVX__)
#include <immintrin.h>
#endif

namespace trainctl::ops::cpu {

namespace {

using math::AdamWConstants;

inline void adamw_scalar(float* param, const float* grad, float* m, float* v, int64_t i,
                         const AdamWConstants& k) {
  const float g = grad[i];
  const float mi = k.beta1 * m[i] + k.one_minus_b1 * g;
  const float vi = k.beta2 * v[i] + k.one_minus_b2 * (g * g);
  m[i] = mi;
  v[i] = vi;
  const float denom = std::sqrt(vi) * k.inv_bc2_sqrt + k.eps;
  param[i] = param[i] * k.decay - (k.step_size * mi) / denom;
}

void adamw_range(float* param, const float* grad, float* m, float* v, int64_t b, int64_t e,
                 const AdamWConstants& k) {
  int64_t i = b;
#if defined(__AVX__)
  const __m256 b1 = _mm256_set1_ps(k.beta1), b2 = _mm256_set1_ps(k.beta2);
  const __m256 omb1 = _mm256_set1_ps(k.one_minus_b1), omb2 = _mm256_set1_ps(k.one_minus_b2);
  const __m256 eps = _mm256_set1_ps(k.eps), decay = _mm256_set1_ps(k.decay);
  const __m256 step = _mm256_set1_ps(k.step_size), ibc2 = _mm256_set1_ps(k.inv_bc2_sqrt);
  for (; i + 8 <= e; i += 8) {
    const __m256 g = _mm256_loadu_ps(grad + i);
    const __m256 mi =
        _mm256_add_ps(_mm256_mul_ps(b1, _mm256_loadu_ps(m + i)), _mm256_mul_ps(omb1, g));
    const __m256 vi = _mm256_add_ps(_mm256_mul_ps(b2, _mm256_loadu_ps(v + i)),
                                    _mm256_mul_ps(omb2, _mm256_mul_ps(g, g)));
    _mm256_storeu_ps(m + i, mi);
    _mm256_storeu_ps(v + i, vi);
    const __m256 denom = _mm256_add_ps(_mm256_mul_ps(_mm256_sqrt_ps(vi), ibc2), eps);
    const __m256 p = _mm256_mul_ps(_mm256_loadu_ps(param + i), decay);
    _mm256_storeu_ps(param + i, _mm256_sub_ps(p, _mm256_div_ps(_mm256_mul_ps(step, mi), denom)));
  }
#endif
  for (; i < e; ++i) adamw_scalar(param, grad, m, v, i, k);
}

}  // namespace

void CpuBackend::adamw(float* param, const float* grad, float* m, float* v, size_t n, float lr,
                       float beta1, float beta2, float eps, float weight_decay, int step) {
  if (step < 1) {
    throw std::invalid_argument("adamw: step is 1-based, got " + std::to_string(step));
  }
  const AdamWConstants k = math::adamw_constants(lr, beta1, beta2, eps, weight_decay, step);
  pool_.parallel_for(static_cast<int64_t>(n), kElementwiseGrain,
                     [&](int64_t b, int64_t e, int) { adamw_range(param, grad, m, v, b, e, k); });
}

}  // namespace trainctl::ops::cpu
