#pragma once
// The hot CPU kernels, compiled once per instruction set (kernels/*.cpp, see isa.h) and
// reached through one table chosen at start-up. Each kernel is serial over the range it
// is given: CpuBackend splits the work over its thread pool and calls these inside tasks.
//
// Every kernel gives the same result on every path except attention on `generic`, which
// multiplies through OpenBLAS (float rounding apart, tests/unit/test_ops_isa.cpp).
#include <cstddef>
#include <cstdint>

#include "ops/cpu/isa.h"
#include "ops/shared_math.h"

namespace trainctl::ops::cpu {

struct CpuKernels {
  Isa isa;

  // --- causal attention of ONE (batch, head) pair -----------------------------------
  // Rows of q, k, v (and of dq, dk, dv) are `ld` floats apart and hold hs contiguous
  // values (nanoGPT's qkv layout read in place with ld = 3C); out and dout rows are `ldo`
  // floats apart; lse[t] is row t's log-sum-exp of scaled scores. `scratch` holds at
  // least *_scratch_floats(T, hs) floats (any alignment).
  size_t (*attention_forward_scratch_floats)(int T, int hs);
  size_t (*attention_backward_scratch_floats)(int T, int hs);
  void (*attention_forward_head)(float* out, int ldo, float* lse, const float* q, const float* k,
                                 const float* v, int ld, int T, int hs, float scale,
                                 float* scratch);
  // dq, dk, dv (=) from dout and the forward's out and lse.
  void (*attention_backward_head)(float* dq, float* dk, float* dv, const float* dout,
                                  const float* out, int ldo, const float* q, const float* k,
                                  const float* v, int ld, const float* lse, int T, int hs,
                                  float scale, float* scratch);

  // --- elementwise over [begin, end) ------------------------------------------------
  void (*gelu_forward)(float* out, const float* inp, int64_t begin, int64_t end);
  void (*gelu_backward)(float* dinp, const float* inp, const float* dout, int64_t begin,
                        int64_t end);
  void (*adamw)(float* param, const float* grad, float* m, float* v, int64_t begin, int64_t end,
                const math::AdamWConstants& k);

  // --- LayerNorm over rows [r0, r1) of width C (eps math::kLayerNormEps) ------------
  void (*layernorm_forward_rows)(float* out, float* mean, float* rstd, const float* inp,
                                 const float* weight, const float* bias, int64_t r0, int64_t r1,
                                 int C);
  // dinp (=); dweight and dbias partial sums (+=) over these rows.
  void (*layernorm_backward_rows)(float* dinp, float* dweight, float* dbias, const float* dout,
                                  const float* inp, const float* weight, const float* mean,
                                  const float* rstd, int64_t r0, int64_t r1, int C);

  // --- softmax cross-entropy of one row of V logits, in place -----------------------
  // Returns the loss -log softmax(logits)[target]. When `backward`, the row becomes
  // dloss * (softmax - onehot(target)).
  float (*xent_row)(float* logits, int V, int target, float dloss, bool backward);

  // --- SwiGLU over rows [r0, r1) of (gate | up), 2H floats each ---------------------
  // out [.., H] = silu(gate) * up; backward: dgate_up (=) from dout and the input.
  void (*swiglu_forward_rows)(float* out, const float* gate_up, int64_t r0, int64_t r1, int H);
  void (*swiglu_backward_rows)(float* dgate_up, const float* dout, const float* gate_up, int64_t r0,
                               int64_t r1, int H);
};

// The table for `isa`; throws IsaError if this binary does not carry that path.
const CpuKernels& cpu_kernels(Isa isa);

}  // namespace trainctl::ops::cpu
