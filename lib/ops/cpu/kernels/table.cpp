// This instruction set's kernel table (compiled once per set, like every file here).
#include "ops/cpu/kernels/parts.h"

namespace trainctl::ops::cpu::TRAINCTL_ISA {

const CpuKernels& kernel_table() {
  static constexpr CpuKernels kTable{
      .isa = Isa::TRAINCTL_ISA,
      .attention_forward_scratch_floats = &attention_forward_scratch_floats,
      .attention_backward_scratch_floats = &attention_backward_scratch_floats,
      .attention_forward_head = &attention_forward_head,
      .attention_backward_head = &attention_backward_head,
      .gelu_forward = &gelu_forward,
      .gelu_backward = &gelu_backward,
      .adamw = &adamw,
      .layernorm_forward_rows = &layernorm_forward_rows,
      .layernorm_backward_rows = &layernorm_backward_rows,
      .xent_row = &xent_row,
      .swiglu_forward_rows = &swiglu_forward_rows,
      .swiglu_backward_rows = &swiglu_backward_rows,
  };
  return kTable;
}

}  // namespace trainctl::ops::cpu::TRAINCTL_ISA
