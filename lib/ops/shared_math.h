#pragma once
// Per-element formulas that the CPU and CUDA backends must agree on, written once as
// __host__ __device__ inline functions: the CUDA kernels call them, and the unit tests
// (tests/unit/test_ops_shared_math.cpp) check them on the CPU against the CPU backend, so
// a formula mistake shows up on machines without a GPU.
#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define TRAINCTL_HD __host__ __device__
#else
#define TRAINCTL_HD
#endif

namespace trainctl::ops::math {

inline constexpr float kLayerNormEps = 1e-5f;  // PyTorch's default
inline constexpr float kSqrt2OverPi = 0.7978845608028654f;
inline constexpr float kGeluCoeff = 0.044715f;

TRAINCTL_HD inline float exp_f(float x) {
#if defined(__CUDA_ARCH__)
  return expf(x);
#else
  return std::exp(x);
#endif
}

TRAINCTL_HD inline uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

TRAINCTL_HD inline float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

// GELU, tanh approximation (GPT-2), through 0.5 (1 + tanh u) = 1 / (1 + exp(-2u)).
TRAINCTL_HD inline float gelu(float x) {
  const float u = kSqrt2OverPi * (x + kGeluCoeff * x * x * x);
  return x / (1.0f + exp_f(-2.0f * u));
}

// d gelu / dx.
TRAINCTL_HD inline float gelu_grad(float x) {
  const float u = kSqrt2OverPi * (x + kGeluCoeff * x * x * x);
  const float s = 1.0f / (1.0f + exp_f(-2.0f * u));  // 0.5 (1 + tanh u)
  const float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCoeff * x * x);
  return s + 2.0f * x * s * (1.0f - s) * du;  // 1 - tanh^2 u = 4 s (1 - s)
}

// AdamW (torch.optim.AdamW order of operations), constants prepared once per call.
struct AdamWConstants {
  float beta1, beta2, one_minus_b1, one_minus_b2, eps, decay, step_size, inv_bc2_sqrt;
};

// Bias corrections in double: beta^t for large t loses digits in float. `step` is 1-based.
inline AdamWConstants adamw_constants(float lr, float beta1, float beta2, float eps,
                                      float weight_decay, int step) {
  const double bc1 = 1.0 - std::pow(static_cast<double>(beta1), step);
  const double bc2 = 1.0 - std::pow(static_cast<double>(beta2), step);
  AdamWConstants k{};
  k.beta1 = beta1;
  k.beta2 = beta2;
  k.one_minus_b1 = 1.0f - beta1;
  k.one_minus_b2 = 1.0f - beta2;
  k.eps = eps;
  k.decay = 1.0f - lr * weight_decay;
  k.step_size = static_cast<float>(static_cast<double>(lr) / bc1);
  k.inv_bc2_sqrt = static_cast<float>(1.0 / std::sqrt(bc2));
  return k;
}

TRAINCTL_HD inline void adamw_update(float& param, float grad, float& m, float& v,
                                     const AdamWConstants& k) {
  const float mi = k.beta1 * m + k.one_minus_b1 * grad;
  const float vi = k.beta2 * v + k.one_minus_b2 * (grad * grad);
  m = mi;
  v = vi;
  const float denom = sqrtf(vi) * k.inv_bc2_sqrt + k.eps;
  param = param * k.decay - (k.step_size * mi) / denom;
}

// fp32 <-> bf16 / fp16, round to nearest even; NaN stays NaN, fp16 overflows to inf.
TRAINCTL_HD inline uint16_t fp32_to_bf16(float f) {
  const uint32_t x = float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x0040u);
  const uint32_t rounding_bias = 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>((x + rounding_bias) >> 16);
}

TRAINCTL_HD inline float bf16_to_fp32(uint16_t h) { return bits_float(uint32_t{h} << 16); }

TRAINCTL_HD inline uint16_t fp32_to_fp16(float f) {
  constexpr uint32_t kF32Inf = 255u << 23;
  constexpr uint32_t kF16Max = (127u + 16u) << 23;
  constexpr uint32_t kDenormMagic = ((127u - 15u) + (23u - 10u) + 1u) << 23;
  uint32_t x = float_bits(f);
  const uint32_t sign = x & 0x80000000u;
  x ^= sign;
  uint32_t o;
  if (x >= kF16Max) {
    o = x > kF32Inf ? 0x7e00u : 0x7c00u;
  } else if (x < (113u << 23)) {
    const float sum = bits_float(x) + bits_float(kDenormMagic);
    o = float_bits(sum) - kDenormMagic;
  } else {
    const uint32_t mant_odd = (x >> 13) & 1u;
    x += ((15u - 127u) << 23) + 0xfffu;
    x += mant_odd;
    o = x >> 13;
  }
  return static_cast<uint16_t>(o | (sign >> 16));
}

TRAINCTL_HD inline float fp16_to_fp32(uint16_t h) {
  constexpr uint32_t kShiftedExp = 0x7c00u << 13;
  uint32_t o = (uint32_t{h} & 0x7fffu) << 13;
  const uint32_t exp = kShiftedExp & o;
  o += (127u - 15u) << 23;
  if (exp == kShiftedExp) {
    o += (128u - 16u) << 23;
  } else if (exp == 0) {
    o += 1u << 23;
    o = float_bits(bits_float(o) - bits_float(113u << 23));
  }
  return bits_float(o | ((uint32_t{h} & 0x8000u) << 16));
}

}  // namespace trainctl::ops::math
