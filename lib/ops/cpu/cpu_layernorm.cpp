// LayerNorm over the last dimension, PyTorch semantics (biased variance, eps 1e-5). The row
// loops are this instruction set's kernels (kernels/elementwise.cpp); here they are split
// over the pool.
#include <algorithm>
#include <vector>

#include "ops/cpu/cpu_backend.h"

namespace trainctl::ops::cpu {

namespace {
int64_t rows_grain(int C) { return std::max<int64_t>(1, kElementwiseGrain / std::max(1, C)); }
}  // namespace

void CpuBackend::layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                                   const float* weight, const float* bias, int N, int C) {
  pool_.parallel_for(N, rows_grain(C), [&](int64_t r0, int64_t r1, int) {
    kernels_.layernorm_forward_rows(out, mean, rstd, inp, weight, bias, r0, r1, C);
  });
}

void CpuBackend::layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                                    const float* inp, const float* weight, const float* mean,
                                    const float* rstd, int N, int C) {
  // Parameter gradients are summed per thread (fixed row ranges, so the order is fixed)
  // and then added in thread order: deterministic for a given thread count.
  std::vector<float*> partials(static_cast<size_t>(pool_.size()), nullptr);
  pool_.parallel_for(N, rows_grain(C), [&](int64_t r0, int64_t r1, int t) {
    float* dw = scratch(t, 2 * static_cast<size_t>(C));
    std::fill_n(dw, 2 * static_cast<size_t>(C), 0.0f);
    partials[static_cast<size_t>(t)] = dw;
    kernels_.layernorm_backward_rows(dinp, dw, dw + C, dout, inp, weight, mean, rstd, r0, r1, C);
  });
  for (float* p : partials) {
    if (p == nullptr) continue;
    for (int i = 0; i < C; ++i) {
      dweight[i] += p[i];
      dbias[i] += p[C + i];
    }
  }
}

}  // namespace trainctl::ops::cpu
