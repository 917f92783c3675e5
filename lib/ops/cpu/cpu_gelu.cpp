// GELU, tanh approximation, as GPT-2 and PyTorch's gelu(approximate='tanh'):
//   gelu(x) = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3).
// Computed through the identity 0.5 (1 + tanh(u)) = sigmoid(2u) = 1 / (1 + exp(-2u)), so a
// single vectorisable exp does the work of tanh.
#include "ops/cpu/cpu_backend.h"
#include "ops/cpu/vec_math.h"

namespace trainctl::ops::cpu {

namespace {
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCoeff = 0.044715f;
}  // namespace

void CpuBackend::gelu_forward(float* out, const float* inp, size_t n) {
  pool_.parallel_for(static_cast<int64_t>(n), kElementwiseGrain, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) {
      const float x = inp[i];
      const float u = kSqrt2OverPi * (x + kGeluCoeff * x * x * x);
      out[i] = x / (1.0f + fast_exp(-2.0f * u));
    }
  });
}

void CpuBackend::gelu_backward(float* dinp, const float* inp, const float* dout, size_t n) {
  pool_.parallel_for(static_cast<int64_t>(n), kElementwiseGrain, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) {
      const float x = inp[i];
      const float u = kSqrt2OverPi * (x + kGeluCoeff * x * x * x);
      const float s = 1.0f / (1.0f + fast_exp(-2.0f * u));  // 0.5 (1 + tanh u)
      const float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCoeff * x * x);
      // d/dx [x s(2u)] = s + x * 2 s (1 - s) du   (since 1 - tanh^2 u = 4 s (1 - s))
      dinp[i] = dout[i] * (s + 2.0f * x * s * (1.0f - s) * du);
    }
  });
}

}  // namespace trainctl::ops::cpu
