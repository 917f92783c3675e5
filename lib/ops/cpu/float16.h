#pragma once
// Scalar conversions between fp32 and the two 16-bit formats, round to nearest even.
// bf16: the top half of an fp32 (NaN stays NaN: quiet bit forced).
// fp16: IEEE binary16 with subnormals, overflow to inf, NaN kept NaN
// (after Fabian Giesen's float_to_half_fast3_rtne / half_to_float).
#include <bit>
#include <cstdint>

namespace trainctl::ops::cpu {

inline uint16_t fp32_to_bf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) {
    return static_cast<uint16_t>((x >> 16) | 0x0040u);  // NaN: keep sign/payload, make quiet
  }
  const uint32_t rounding_bias = 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>((x + rounding_bias) >> 16);
}

inline float bf16_to_fp32(uint16_t h) { return std::bit_cast<float>(uint32_t{h} << 16); }

inline uint16_t fp32_to_fp16(float f) {
  constexpr uint32_t kF32Inf = 255u << 23;
  constexpr uint32_t kF16Max = (127u + 16u) << 23;  // 65536: first value that must be inf
  constexpr uint32_t kDenormMagic = ((127u - 15u) + (23u - 10u) + 1u) << 23;
  uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = x & 0x80000000u;
  x ^= sign;
  uint32_t o;
  if (x >= kF16Max) {
    o = x > kF32Inf ? 0x7e00u : 0x7c00u;  // NaN stays NaN, the rest overflows to inf
  } else if (x < (113u << 23)) {
    // Result is subnormal or zero: let the FPU's round-to-nearest-even align the mantissa.
    const float sum = std::bit_cast<float>(x) + std::bit_cast<float>(kDenormMagic);
    o = std::bit_cast<uint32_t>(sum) - kDenormMagic;
  } else {
    const uint32_t mant_odd = (x >> 13) & 1u;
    x += ((15u - 127u) << 23) + 0xfffu;  // rebias exponent (wraps as intended) and round
    x += mant_odd;
    o = x >> 13;
  }
  return static_cast<uint16_t>(o | (sign >> 16));
}

inline float fp16_to_fp32(uint16_t h) {
  constexpr uint32_t kShiftedExp = 0x7c00u << 13;
  uint32_t o = (uint32_t{h} & 0x7fffu) << 13;
  const uint32_t exp = kShiftedExp & o;
  o += (127u - 15u) << 23;
  if (exp == kShiftedExp) {
    o += (128u - 16u) << 23;  // inf / NaN
  } else if (exp == 0) {
    o += 1u << 23;  // zero / subnormal: renormalise through an fp32 subtraction
    o = std::bit_cast<uint32_t>(std::bit_cast<float>(o) - std::bit_cast<float>(113u << 23));
  }
  return std::bit_cast<float>(o | ((uint32_t{h} & 0x8000u) << 16));
}

}  // namespace trainctl::ops::cpu
