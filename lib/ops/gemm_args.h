#pragma once
// The argument contract of Backend::gemm (ops/backend.h), checked the same way by every
// backend before it touches memory. Header-only: the CUDA plugin compiles it without
// linking the CPU ops library.
#include <algorithm>
#include <stdexcept>
#include <string>

namespace trainctl::ops {

// Throws std::invalid_argument for a negative dimension, or for a leading dimension shorter
// than a row of its row-major matrix (op(A) is MxK, op(B) KxN, C MxN; at least 1, as BLAS
// requires, even when the matrix is empty).
inline void check_gemm_args(bool trans_a, bool trans_b, int M, int N, int K, int lda, int ldb,
                            int ldc) {
  if (M < 0 || N < 0 || K < 0) {
    throw std::invalid_argument("gemm: negative dimension (M=" + std::to_string(M) +
                                ", N=" + std::to_string(N) + ", K=" + std::to_string(K) + ")");
  }
  const int min_lda = std::max(1, trans_a ? M : K);
  const int min_ldb = std::max(1, trans_b ? K : N);
  if (lda < min_lda || ldb < min_ldb || ldc < std::max(1, N)) {
    throw std::invalid_argument("gemm: leading dimension too small (lda=" + std::to_string(lda) +
                                ", ldb=" + std::to_string(ldb) + ", ldc=" + std::to_string(ldc) +
                                " for M=" + std::to_string(M) + ", N=" + std::to_string(N) +
                                ", K=" + std::to_string(K) + ")");
  }
}

}  // namespace trainctl::ops
