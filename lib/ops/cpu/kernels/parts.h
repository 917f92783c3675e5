#pragma once
// The kernels of one instruction set, as compiled into namespace TRAINCTL_ISA (see
// lib/CMakeLists.txt, which builds kernels/*.cpp once per set). table.cpp gathers them
// into that set's CpuKernels; the contracts are in ops/cpu/cpu_kernels.h.
#include <cstddef>
#include <cstdint>

#include "ops/cpu/cpu_kernels.h"

namespace trainctl::ops::cpu::TRAINCTL_ISA {

const CpuKernels& kernel_table();

size_t attention_forward_scratch_floats(int T, int hs);
size_t attention_backward_scratch_floats(int T, int hs);
void attention_forward_head(float* out, int ldo, float* lse, const float* q, const float* k,
                            const float* v, int ld, int T, int hs, float scale, float* scratch);
void attention_backward_head(float* dq, float* dk, float* dv, const float* dout, const float* out,
                             int ldo, const float* q, const float* k, const float* v, int ld,
                             const float* lse, int T, int hs, float scale, float* scratch);

void gelu_forward(float* out, const float* inp, int64_t begin, int64_t end);
void gelu_backward(float* dinp, const float* inp, const float* dout, int64_t begin, int64_t end);
void adamw(float* param, const float* grad, float* m, float* v, int64_t begin, int64_t end,
           const math::AdamWConstants& k);
void layernorm_forward_rows(float* out, float* mean, float* rstd, const float* inp,
                            const float* weight, const float* bias, int64_t r0, int64_t r1, int C);
void layernorm_backward_rows(float* dinp, float* dweight, float* dbias, const float* dout,
                             const float* inp, const float* weight, const float* mean,
                             const float* rstd, int64_t r0, int64_t r1, int C);
float xent_row(float* logits, int V, int target, float dloss, bool backward);
void swiglu_forward_rows(float* out, const float* gate_up, int64_t r0, int64_t r1, int H);
void swiglu_backward_rows(float* dgate_up, const float* dout, const float* gate_up, int64_t r0,
                          int64_t r1, int H);

}  // namespace trainctl::ops::cpu::TRAINCTL_ISA
