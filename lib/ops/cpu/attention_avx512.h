#pragma once
// Causal self-attention of ONE (batch, head) pair with hand-written AVX-512 kernels.
//
// The per-head products are small (T x T x hs with hs = 64 typically), where a general
// sgemm spends much of its time on call overhead and packing and cannot skip the masked
// half at a fine grain. These kernels keep 6-row by 64-wide tiles in registers and stop
// each tile at the causal diagonal (16-key granularity).
//
// The code is compiled for AVX-512 through function attributes (not -march flags), so it
// exists in every x86-64 build (Debug and sanitizer builds included) and is chosen at run
// time: call supported() first; the caller keeps a generic path for other CPUs.
//
// Layout: rows of q, k, v (and of dq, dk, dv) are `ld` floats apart and hold hs contiguous
// values (nanoGPT's qkv layout read in place with ld = 3C); out and dout rows are `ldo`
// floats apart. Any T >= 1 and hs >= 1 are accepted.
#include <cstddef>

namespace trainctl::ops::cpu::attention_avx512 {

// True when the CPU executes AVX-512F (and this build could compile the kernels).
bool supported();

// Floats of scratch that forward_head / backward_head need (any alignment is fine).
size_t forward_scratch_floats(int T, int hs);
size_t backward_scratch_floats(int T, int hs);

// out = softmax(scale q k^T, causal) v; lse[t] = log-sum-exp of row t's scaled scores.
void forward_head(float* out, int ldo, float* lse, const float* q, const float* k, const float* v,
                  int ld, int T, int hs, float scale, float* scratch);

// dq, dk, dv (=) from dout and the forward's out and lse.
void backward_head(float* dq, float* dk, float* dv, const float* dout, const float* out, int ldo,
                   const float* q, const float* k, const float* v, int ld, const float* lse, int T,
                   int hs, float scale, float* scratch);

}  // namespace trainctl::ops::cpu::attention_avx512
