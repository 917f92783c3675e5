// AdamW in one pass over (param, grad, m, v), with PyTorch's operation order
// (torch.optim.AdamW, foreach=False):
//   p *= 1 - lr*wd;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
//   p -= (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
#include <cmath>
#include <stdexcept>
#include <string>

#include "ops/cpu/cpu_backend.h"

namespace trainctl::ops::cpu {

void CpuBackend::adamw(float* param, const float* grad, float* m, float* v, size_t n, float lr,
                       float beta1, float beta2, float eps, float weight_decay, int step) {
  if (step < 1) {
    throw std::invalid_argument("adamw: step is 1-based, got " + std::to_string(step));
  }
  // Bias corrections in double: b^t for large t loses digits in float.
  const double bc1 = 1.0 - std::pow(static_cast<double>(beta1), step);
  const double bc2 = 1.0 - std::pow(static_cast<double>(beta2), step);
  const float step_size = static_cast<float>(static_cast<double>(lr) / bc1);
  const float inv_bc2_sqrt = static_cast<float>(1.0 / std::sqrt(bc2));
  const float decay = 1.0f - lr * weight_decay;
  const float one_minus_b1 = 1.0f - beta1;
  const float one_minus_b2 = 1.0f - beta2;
  pool_.parallel_for(static_cast<int64_t>(n), kElementwiseGrain, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) {
      const float g = grad[i];
      const float mi = beta1 * m[i] + one_minus_b1 * g;
      const float vi = beta2 * v[i] + one_minus_b2 * g * g;
      m[i] = mi;
      v[i] = vi;
      const float denom = std::sqrt(vi) * inv_bc2_sqrt + eps;
      param[i] = param[i] * decay - step_size * mi / denom;
    }
  });
}

}  // namespace trainctl::ops::cpu
