#pragma once
// Branch-free float math written as plain scalar code so that loops calling it vectorise
// (glibc's expf/tanhf do not, without -ffast-math).
//
// Always inlined: the per-instruction-set kernels (kernels/) include this header, and an
// out-of-line copy compiled with AVX-512 flags must never be what baseline code calls.
#include <cstdint>

#define TRAINCTL_VEC_INLINE [[gnu::always_inline]] inline

namespace trainctl::ops::cpu {

// exp(x) with ~1 ulp error (Cephes' expf polynomial, range reduction by ln 2).
// Inputs are clamped to [-87.3, 88.37]: results below FLT_MIN stay at about 1e-38, above
// saturate near FLT_MAX; callers that need exact 0 or inf handle those ranges themselves.
TRAINCTL_VEC_INLINE float fast_exp(float x) {
  // Ternaries (not fmin/fmax) so the compiler emits vminps/vmaxps without -ffast-math.
  x = x < -87.3f ? -87.3f : x;
  x = x > 88.37f ? 88.37f : x;
  // Round x*log2(e) to the nearest integer with the 1.5*2^23 trick (floorf is a libm call
  // without -ffast-math and would stop vectorisation); the integer is then in t's low bits.
  constexpr float kRound = 12582912.0f;
  const float t = x * 1.44269504088896341f + kRound;
  const float n = t - kRound;
  float r = x - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;
  const float r2 = r * r;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r2 + r + 1.0f;
  // 2^n built directly in the exponent field (n is in [-126, 127] after the clamp).
  // (__builtin_bit_cast rather than std::bit_cast: a function template, which an -O0 build
  // would emit out of line with the including kernel's instruction set.)
  const int32_t bits = (__builtin_bit_cast(int32_t, t) - __builtin_bit_cast(int32_t, kRound) + 127)
                       << 23;
  return y * __builtin_bit_cast(float, bits);
}

}  // namespace trainctl::ops::cpu

namespace trainctl::ops::cpu {

// Reductions with kLanes independent partial sums: float addition is not associative, so
// a plain `s += x[i]` loop stays scalar; a fixed lane array vectorises under -O3 and the
// result does not depend on the thread count or on alignment.
inline constexpr int kLanes = 16;

TRAINCTL_VEC_INLINE float reduce_lanes(const float* lanes) {
  float s = 0.0f;
  for (int k = 0; k < kLanes; ++k) s += lanes[k];
  return s;
}

TRAINCTL_VEC_INLINE float sum_of(const float* x, int n) {
  float lanes[kLanes] = {};
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int k = 0; k < kLanes; ++k) lanes[k] += x[i + k];
  }
  for (; i < n; ++i) lanes[i % kLanes] += x[i];
  return reduce_lanes(lanes);
}

// sum (x[i] - c)^2
TRAINCTL_VEC_INLINE float sum_sq_dev(const float* x, float c, int n) {
  float lanes[kLanes] = {};
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int k = 0; k < kLanes; ++k) {
      const float d = x[i + k] - c;
      lanes[k] += d * d;
    }
  }
  for (; i < n; ++i) {
    const float d = x[i] - c;
    lanes[i % kLanes] += d * d;
  }
  return reduce_lanes(lanes);
}

TRAINCTL_VEC_INLINE float dot_of(const float* a, const float* b, int n) {
  float lanes[kLanes] = {};
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int k = 0; k < kLanes; ++k) lanes[k] += a[i + k] * b[i + k];
  }
  for (; i < n; ++i) lanes[i % kLanes] += a[i] * b[i];
  return reduce_lanes(lanes);
}

TRAINCTL_VEC_INLINE float max_of(const float* x, int n) {
  float lanes[kLanes];
  for (int k = 0; k < kLanes; ++k) lanes[k] = x[0];
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int k = 0; k < kLanes; ++k) lanes[k] = x[i + k] > lanes[k] ? x[i + k] : lanes[k];
  }
  for (; i < n; ++i) lanes[i % kLanes] = x[i] > lanes[i % kLanes] ? x[i] : lanes[i % kLanes];
  float m = lanes[0];
  for (int k = 1; k < kLanes; ++k) m = lanes[k] > m ? lanes[k] : m;
  return m;
}

}  // namespace trainctl::ops::cpu
