// LM head fused with softmax cross-entropy. Rows are processed in blocks: a block's logits
// [rows, V] live in a per-thread scratch (cache-sized for small vocabularies), become
// dlogits in place and feed both gradient products before the next block, so the [N, V]
// logits never exist whole.
//
// Threads take contiguous ranges of blocks. dwte is a sum over all rows: thread 0
// accumulates straight into it, the others into private [V, C] partials that are added
// afterwards in thread order (deterministic for a given thread count).
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "ops/cpu/cpu_backend.h"
#include "ops/cpu/sgemm.h"

namespace trainctl::ops::cpu {

namespace {

// About 256 KiB of logits per block (L2-resident), but at least 32 rows so the products
// stay efficient and at most 128 so two threads share small problems.
int rows_per_block(int V) { return std::clamp((1 << 16) / std::max(V, 1), 32, 128); }

}  // namespace

void CpuBackend::lm_head_cross_entropy(float* losses, float* dx, float* dwte, const float* x,
                                       const float* wte, const int32_t* targets, int N, int C,
                                       int V, float dloss) {
  if (N <= 0) return;
  if (V <= 0 || C <= 0) {
    throw std::invalid_argument("lm_head_cross_entropy: V and C must be positive");
  }
  const bool backward = dx != nullptr;
  x = matmul_operand(0, x, N, C, C);
  wte = matmul_operand(1, wte, V, C, C);
  const int rb = rows_per_block(V);
  const int64_t blocks = (N + rb - 1) / rb;
  const size_t vc = static_cast<size_t>(V) * C;
  std::vector<float*> partials(static_cast<size_t>(pool_.size()), nullptr);

  pool_.parallel_for(blocks, 1, [&](int64_t b0, int64_t b1, int t) {
    const size_t logits_size = static_cast<size_t>(rb) * V;
    float* logits = scratch(t, logits_size + (backward && t > 0 ? vc : 0));
    float* dw = dwte;
    if (backward && t > 0) {
      dw = logits + logits_size;
      std::fill(dw, dw + vc, 0.0f);
      partials[static_cast<size_t>(t)] = dw;
    }
    for (int64_t blk = b0; blk < b1; ++blk) {
      const int r0 = static_cast<int>(blk * rb);
      const int n = std::min(rb, N - r0);
      const float* xb = x + int64_t{r0} * C;
      sgemm_serial(false, true, n, V, C, 1.0f, xb, C, wte, C, 0.0f, logits, V);
      for (int i = 0; i < n; ++i) {
        float* l = logits + int64_t{i} * V;
        const int32_t target = targets[r0 + i];
        if (target >= V) {
          throw std::out_of_range("lm_head_cross_entropy: target " + std::to_string(target) +
                                  " at row " + std::to_string(r0 + i) +
                                  " is outside the vocabulary of " + std::to_string(V));
        }
        if (target < 0) {  // ignored position: no loss, no gradient
          losses[r0 + i] = 0.0f;
          if (backward) std::fill(l, l + V, 0.0f);
          continue;
        }
        losses[r0 + i] = kernels_.xent_row(l, V, target, dloss, backward);
      }
      if (backward) {
        round_to(matmul_dtype(), logits, logits, static_cast<size_t>(n) * V);
        sgemm_serial(false, false, n, C, V, 1.0f, logits, V, wte, C, 0.0f, dx + int64_t{r0} * C, C);
        sgemm_serial(true, false, V, C, n, 1.0f, logits, V, xb, C, 1.0f, dw, C);
      }
    }
  });

  for (size_t t = 1; t < partials.size(); ++t) {
    const float* part = partials[t];
    if (part == nullptr) continue;
    pool_.parallel_for(static_cast<int64_t>(vc), kElementwiseGrain, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) dwte[i] += part[i];
    });
  }
}

}  // namespace trainctl::ops::cpu
