// SwiGLU over rows of (gate | up): out = silu(gate) * up, and its gradient, with one
// vectorisable exp per element (the CPU backend's std::exp loop was scalar).
//
// As elementwise.cpp: built with -ffp-contract=off, and the AVX2/AVX-512 loops do the
// scalar tail's operations in the same order, so every instruction set gives the same bits.
#include "ops/cpu/kernels/parts.h"
#include "ops/cpu/vec_math.h"

#if defined(__AVX2__)
#include "ops/cpu/kernels/simd.h"
#define TRAINCTL_VECTOR_EXP 1
#else
#define TRAINCTL_VECTOR_EXP 0
#endif

namespace trainctl::ops::cpu::TRAINCTL_ISA {

void swiglu_forward_rows(float* out, const float* gate_up, int64_t r0, int64_t r1, int H) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* g = gate_up + r * 2 * H;
    const float* u = g + H;
    float* y = out + r * H;
    int i = 0;
#if TRAINCTL_VECTOR_EXP
    const simd::V one = simd::set1(1.0f);
    for (; i + simd::kWidth <= H; i += simd::kWidth) {
      const simd::V gv = simd::loadu(g + i);
      const simd::V den = simd::add(one, simd::exp<false>(simd::sub(simd::zero(), gv)));
      simd::storeu(y + i, simd::mul(simd::div(gv, den), simd::loadu(u + i)));
    }
#endif
    for (; i < H; ++i) y[i] = g[i] / (1.0f + fast_exp(-g[i])) * u[i];
  }
}

void swiglu_backward_rows(float* dgate_up, const float* dout, const float* gate_up, int64_t r0,
                          int64_t r1, int H) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* g = gate_up + r * 2 * H;
    const float* u = g + H;
    const float* dy = dout + r * H;
    float* dg = dgate_up + r * 2 * H;
    float* du = dg + H;
    int i = 0;
#if TRAINCTL_VECTOR_EXP
    const simd::V one = simd::set1(1.0f);
    for (; i + simd::kWidth <= H; i += simd::kWidth) {
      const simd::V gv = simd::loadu(g + i);
      const simd::V dyv = simd::loadu(dy + i);
      const simd::V sig =
          simd::div(one, simd::add(one, simd::exp<false>(simd::sub(simd::zero(), gv))));
      simd::storeu(du + i, simd::mul(simd::mul(dyv, gv), sig));
      const simd::V slope = simd::add(one, simd::mul(gv, simd::sub(one, sig)));
      simd::storeu(dg + i, simd::mul(simd::mul(simd::mul(dyv, simd::loadu(u + i)), sig), slope));
    }
#endif
    for (; i < H; ++i) {
      const float sig = 1.0f / (1.0f + fast_exp(-g[i]));
      du[i] = dy[i] * g[i] * sig;
      dg[i] = dy[i] * u[i] * sig * (1.0f + g[i] * (1.0f - sig));
    }
  }
}

}  // namespace trainctl::ops::cpu::TRAINCTL_ISA
