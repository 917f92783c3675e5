#pragma once
// Vector operations for the kernels of one instruction set, so that the register-blocked
// attention (attention_tiles.cpp) is written once for AVX2 and AVX-512. Included only by
// translation units that CMake compiles with that set's flags (-mavx2 -mfma, or
// -mavx512f ...); TRAINCTL_ISA names the namespace that keeps each copy's symbols apart.
//
// Everything the kernels reduce is reduced in 16-lane groups whatever the vector width
// (two 8-wide vectors on AVX2), so both sets do the same arithmetic in the same order
// and give bitwise identical results.
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12's AVX-512 intrinsics start from `undefined` vectors initialised from themselves,
// which -W(maybe-)uninitialized reports inside the header once the kernels are inlined: a
// known false positive, silenced for the files that include this one.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>

#include <cstdint>

namespace trainctl::ops::cpu::TRAINCTL_ISA::simd {

#if defined(__AVX512F__)

inline constexpr int kWidth = 16;
using V = __m512;
using Mask = __mmask16;

inline V zero() { return _mm512_setzero_ps(); }
inline V set1(float x) { return _mm512_set1_ps(x); }
inline V load(const float* p) { return _mm512_load_ps(p); }  // 64-byte aligned
inline V loadu(const float* p) { return _mm512_loadu_ps(p); }
inline void store(float* p, V v) { _mm512_store_ps(p, v); }
inline void storeu(float* p, V v) { _mm512_storeu_ps(p, v); }
inline V add(V a, V b) { return _mm512_add_ps(a, b); }
inline V sub(V a, V b) { return _mm512_sub_ps(a, b); }
inline V mul(V a, V b) { return _mm512_mul_ps(a, b); }
inline V div(V a, V b) { return _mm512_div_ps(a, b); }
inline V max(V a, V b) { return _mm512_max_ps(a, b); }
inline V min(V a, V b) { return _mm512_min_ps(a, b); }
inline V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }    // a b + c
inline V fnmadd(V a, V b, V c) { return _mm512_fnmadd_ps(a, b, c); }  // c - a b

// Lanes [0, n) of a vector (none for n <= 0, all for n >= kWidth).
inline Mask first_lanes(int n) {
  if (n <= 0) return 0;
  return n >= kWidth ? static_cast<Mask>(0xFFFF) : static_cast<Mask>((1u << n) - 1u);
}
inline V load_first(Mask m, const float* p) { return _mm512_maskz_loadu_ps(m, p); }
inline V load_first_or(Mask m, const float* p, V other) {
  return _mm512_mask_loadu_ps(other, m, p);
}
inline void store_first(float* p, Mask m, V v) { _mm512_mask_storeu_ps(p, m, v); }
inline V keep_first(Mask m, V v) { return _mm512_maskz_mov_ps(m, v); }

// 2^n as a float, where t = n + round (round = 1.5 * 2^23 keeps n in t's low bits).
inline V pow2_of_rounded(V t, V round) {
  const __m512i n = _mm512_sub_epi32(_mm512_castps_si512(t), _mm512_castps_si512(round));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n, _mm512_set1_epi32(127)), 23));
}

#elif defined(__AVX2__) && defined(__FMA__)

inline constexpr int kWidth = 8;
using V = __m256;
using Mask = __m256i;

inline V zero() { return _mm256_setzero_ps(); }
inline V set1(float x) { return _mm256_set1_ps(x); }
inline V load(const float* p) { return _mm256_load_ps(p); }  // 32-byte aligned
inline V loadu(const float* p) { return _mm256_loadu_ps(p); }
inline void store(float* p, V v) { _mm256_store_ps(p, v); }
inline void storeu(float* p, V v) { _mm256_storeu_ps(p, v); }
inline V add(V a, V b) { return _mm256_add_ps(a, b); }
inline V sub(V a, V b) { return _mm256_sub_ps(a, b); }
inline V mul(V a, V b) { return _mm256_mul_ps(a, b); }
inline V div(V a, V b) { return _mm256_div_ps(a, b); }
inline V max(V a, V b) { return _mm256_max_ps(a, b); }
inline V min(V a, V b) { return _mm256_min_ps(a, b); }
inline V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
inline V fnmadd(V a, V b, V c) { return _mm256_fnmadd_ps(a, b, c); }

inline Mask first_lanes(int n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
// Masked loads and stores never touch memory outside the mask (no faults past a row).
inline V load_first(Mask m, const float* p) { return _mm256_maskload_ps(p, m); }
inline V load_first_or(Mask m, const float* p, V other) {
  return _mm256_blendv_ps(other, _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m));
}
inline void store_first(float* p, Mask m, V v) { _mm256_maskstore_ps(p, m, v); }
inline V keep_first(Mask m, V v) { return _mm256_and_ps(v, _mm256_castsi256_ps(m)); }

inline V pow2_of_rounded(V t, V round) {
  const __m256i n = _mm256_sub_epi32(_mm256_castps_si256(t), _mm256_castps_si256(round));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n, _mm256_set1_epi32(127)), 23));
}

#else
#error "kernels/simd.h needs AVX2+FMA or AVX-512F flags (see lib/CMakeLists.txt)"
#endif

// a b + c, with one rounding (Fused) or two, as the scalar `a * b + c` is compiled here.
template <bool Fused>
inline V mul_add(V a, V b, V c) {
  if constexpr (Fused) {
    return fmadd(a, b, c);
  } else {
    return add(mul(a, b), c);
  }
}

// fast_exp (vec_math.h) on a vector: the same Cephes polynomial and clamps. Unfused, it is
// the scalar function's exact operations in order (bitwise equal to it, NaN aside: the
// clamps here send NaN to a bound); fused, one rounding fewer per step.
template <bool Fused>
inline V exp(V x) {
  x = max(x, set1(-87.3f));
  x = min(x, set1(88.37f));
  const V round = set1(12582912.0f);
  const V t = mul_add<Fused>(x, set1(1.44269504088896341f), round);
  const V n = sub(t, round);
  V r;
  if constexpr (Fused) {
    r = fnmadd(n, set1(0.693359375f), x);
  } else {
    r = sub(x, mul(n, set1(0.693359375f)));
  }
  r = mul_add<Fused>(n, set1(2.12194440e-4f), r);
  const V r2 = mul(r, r);
  V p = set1(1.9875691500e-4f);
  p = mul_add<Fused>(p, r, set1(1.3981999507e-3f));
  p = mul_add<Fused>(p, r, set1(8.3334519073e-3f));
  p = mul_add<Fused>(p, r, set1(4.1665795894e-2f));
  p = mul_add<Fused>(p, r, set1(1.6666665459e-1f));
  p = mul_add<Fused>(p, r, set1(5.0000001201e-1f));
  const V y = add(mul_add<Fused>(p, r2, r), set1(1.0f));
  return mul(y, pow2_of_rounded(t, round));
}

}  // namespace trainctl::ops::cpu::TRAINCTL_ISA::simd
