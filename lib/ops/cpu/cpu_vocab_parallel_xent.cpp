// Cross-entropy over a vocabulary split across tensor-parallel ranks (see backend.h). Rows
// are independent, so every op is a parallel loop over rows.
#include <algorithm>
#include <cmath>

#include "ops/cpu/cpu_backend.h"
#include "ops/cpu/vec_math.h"

namespace trainctl::ops::cpu {

namespace {
int64_t row_grain(int V) { return std::max<int64_t>(1, kElementwiseGrain / std::max(1, V)); }
}  // namespace

void CpuBackend::xent_row_max(float* row_max, const float* logits, int N, int V) {
  pool_.parallel_for(N, row_grain(V), [&](int64_t r0, int64_t r1, int) {
    for (int64_t i = r0; i < r1; ++i) row_max[i] = max_of(logits + i * V, V);
  });
}

void CpuBackend::xent_partial_sums(float* stats, const float* logits, const float* row_max,
                                   const int32_t* targets, VocabRange vocab, int N) {
  const int V = vocab.count;
  pool_.parallel_for(N, row_grain(V), [&](int64_t r0, int64_t r1, int) {
    for (int64_t i = r0; i < r1; ++i) {
      const float* l = logits + i * V;
      const float mx = row_max[i];
      double sum = 0.0;
      for (int j = 0; j < V; ++j) sum += fast_exp(l[j] - mx);
      stats[2 * i] = static_cast<float>(sum);
      stats[2 * i + 1] = vocab.holds(targets[i]) ? l[targets[i] - vocab.begin] : 0.0f;
    }
  });
}

void CpuBackend::xent_finish(float* losses, float* dlogits, const float* logits,
                             const float* row_max, const float* stats, const int32_t* targets,
                             VocabRange vocab, int N, float dloss) {
  const int V = vocab.count;
  pool_.parallel_for(N, row_grain(V), [&](int64_t r0, int64_t r1, int) {
    for (int64_t i = r0; i < r1; ++i) {
      const int32_t target = targets[i];
      const float* l = logits + i * V;
      float* d = dlogits != nullptr ? dlogits + i * V : nullptr;
      if (target < 0) {  // ignored position: no loss, no gradient
        losses[i] = 0.0f;
        if (d != nullptr) std::fill(d, d + V, 0.0f);
        continue;
      }
      const float mx = row_max[i];
      const float sum = stats[2 * i];
      losses[i] = mx + std::log(sum) - stats[2 * i + 1];
      if (d != nullptr) {
        const float f = dloss / sum;
        for (int j = 0; j < V; ++j) d[j] = fast_exp(l[j] - mx) * f;
        if (vocab.holds(target)) d[target - vocab.begin] -= dloss;
      }
    }
  });
}

}  // namespace trainctl::ops::cpu
