// AdamW in one pass over (param, grad, m, v), with PyTorch's operation order
// (torch.optim.AdamW, foreach=False): the loop is this instruction set's kernel
// (kernels/elementwise.cpp), the constants come from ops/shared_math.h as on the GPU.
#include <stdexcept>
#include <string>

#include "ops/cpu/cpu_backend.h"

namespace trainctl::ops::cpu {

void CpuBackend::adamw(float* param, const float* grad, float* m, float* v, size_t n, float lr,
                       float beta1, float beta2, float eps, float weight_decay, int step) {
  if (step < 1) {
    throw std::invalid_argument("adamw: step is 1-based, got " + std::to_string(step));
  }
  const math::AdamWConstants k = math::adamw_constants(lr, beta1, beta2, eps, weight_decay, step);
  pool_.parallel_for(static_cast<int64_t>(n), kElementwiseGrain, [&](int64_t b, int64_t e, int) {
    kernels_.adamw(param, grad, m, v, b, e, k);
  });
}

}  // namespace trainctl::ops::cpu
