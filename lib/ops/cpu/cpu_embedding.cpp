// Token + position embeddings. The backward scatters into wte rows that several positions
// may share, so it is split over COLUMNS (each thread owns a slice of every row): no two
// threads ever touch the same float, and the summation order is fixed.
#include <algorithm>

#include "ops/cpu/cpu_backend.h"

namespace trainctl::ops::cpu {

void CpuBackend::embedding_forward(float* out, const int32_t* tokens, const float* wte,
                                   VocabRange vocab, const float* wpe, int B, int T, int C) {
  const int64_t rows = int64_t{B} * T;
  pool_.parallel_for(rows, std::max<int64_t>(1, kElementwiseGrain / std::max(1, C)),
                     [&](int64_t r0, int64_t r1, int) {
                       for (int64_t r = r0; r < r1; ++r) {
                         float* o = out + r * C;
                         if (vocab.holds(tokens[r])) {
                           const float* te = wte + int64_t{tokens[r] - vocab.begin} * C;
                           std::copy(te, te + C, o);
                         } else {
                           std::fill(o, o + C, 0.0f);
                         }
                         if (wpe != nullptr) {
                           const float* pe = wpe + (r % T) * C;
                           for (int i = 0; i < C; ++i) o[i] += pe[i];
                         }
                       }
                     });
}

void CpuBackend::embedding_backward(float* dwte, float* dwpe, const float* dout,
                                    const int32_t* tokens, VocabRange vocab, int B, int T, int C) {
  const int64_t rows = int64_t{B} * T;
  // Whole cache lines per thread (16 floats) so threads never write the same line.
  const int64_t grain = rows * C >= kElementwiseGrain ? 16 : C;
  pool_.parallel_for(C, grain, [&](int64_t c0, int64_t c1, int) {
    const int width = static_cast<int>(c1 - c0);
    for (int64_t r = 0; r < rows; ++r) {
      const float* d = dout + r * C + c0;
      if (vocab.holds(tokens[r])) {
        float* te = dwte + int64_t{tokens[r] - vocab.begin} * C + c0;
        for (int i = 0; i < width; ++i) te[i] += d[i];
      }
      if (dwpe != nullptr) {
        float* pe = dwpe + (r % T) * C + c0;
        for (int i = 0; i < width; ++i) pe[i] += d[i];
      }
    }
  });
}

}  // namespace trainctl::ops::cpu
