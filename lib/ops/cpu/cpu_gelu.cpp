// GELU, tanh approximation (GPT-2): the element loops are this instruction set's kernels
// (kernels/elementwise.cpp); here they are split over the pool.
#include "ops/cpu/cpu_backend.h"

namespace trainctl::ops::cpu {

void CpuBackend::gelu_forward(float* out, const float* inp, size_t n) {
  pool_.parallel_for(static_cast<int64_t>(n), kElementwiseGrain,
                     [&](int64_t b, int64_t e, int) { kernels_.gelu_forward(out, inp, b, e); });
}

void CpuBackend::gelu_backward(float* dinp, const float* inp, const float* dout, size_t n) {
  pool_.parallel_for(static_cast<int64_t>(n), kElementwiseGrain, [&](int64_t b, int64_t e, int) {
    kernels_.gelu_backward(dinp, inp, dout, b, e);
  });
}

}  // namespace trainctl::ops::cpu
