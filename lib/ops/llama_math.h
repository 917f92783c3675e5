#pragma once
// Per-element formulas of the Llama-family ops (Backend::rope_*, Backend::swiglu_*) written
// once for the CUDA kernels, as shared_math.h does for GELU and the casts. They match the
// CPU backend's loops (ops/cpu/cpu_llama_ops.cpp, and kernels/swiglu.cpp, whose exp is
// vec_math.h's fast_exp: a few ulp apart, as GELU's) operation for operation, and
// tests/unit/test_llama_math.cpp checks them against the CPU backend on machines without a
// GPU, so a formula mistake in the CUDA path shows up there.
#include <cmath>

#include "ops/shared_math.h"

namespace trainctl::ops::math {

// RoPE's inverse frequency of pair i (Hugging Face: 1 / theta^(2i / head_dim) in fp32).
// Host only: the CUDA launcher computes the table here and passes it to the kernel, so
// both backends rotate by bit-identical angles (device powf may round differently).
inline float rope_inv_freq(int i, int head_dim, float theta) {
  return 1.0f / std::pow(theta, static_cast<float>(2 * i) / static_cast<float>(head_dim));
}

// Rotation of the pair (a, b) = (x[i], x[i + head_dim/2]) by an angle with cosine c and
// sine s (rotate_half: x * cos + rotate_half(x) * sin). The inverse rotation passes -s.
TRAINCTL_HD inline float rope_first(float a, float b, float c, float s) { return a * c - b * s; }
TRAINCTL_HD inline float rope_second(float a, float b, float c, float s) { return b * c + a * s; }

TRAINCTL_HD inline float sigmoid(float g) { return 1.0f / (1.0f + exp_f(-g)); }

// silu(gate) * up.
TRAINCTL_HD inline float swiglu(float gate, float up) { return gate / (1.0f + exp_f(-gate)) * up; }

// Gradients of swiglu(gate, up) scaled by dy: d/dup = silu(gate) and
// d/dgate = up * sig * (1 + gate * (1 - sig)), sig = sigmoid(gate).
TRAINCTL_HD inline void swiglu_grad(float gate, float up, float dy, float* dgate, float* dup) {
  const float sig = sigmoid(gate);
  *dup = dy * gate * sig;
  *dgate = dy * up * sig * (1.0f + gate * (1.0f - sig));
}

}  // namespace trainctl::ops::math
