#include "ops/cpu/sgemm.h"

#include <cblas.h>

#include <cstdint>

namespace trainctl::ops::cpu {

namespace {
// Below ~4 MFLOP (about 50 us on one core) waking a second thread is not worth it.
constexpr int64_t kParallelFlops = int64_t{1} << 22;
// Blocks are whole multiples of the sgemm micro-kernel's tile so no thread gets a ragged
// edge in the middle of the matrix.
constexpr int64_t kBlockGrain = 32;
}  // namespace

void sgemm_serial(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A,
                  int lda, const float* B, int ldb, float beta, float* C, int ldc) {
  if (M <= 0 || N <= 0) return;
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void sgemm_parallel(ThreadPool& pool, bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                    const float* A, int lda, const float* B, int ldb, float beta, float* C,
                    int ldc) {
  const int64_t flops = int64_t{2} * M * N * K;
  if (pool.size() == 1 || flops < kParallelFlops) {
    sgemm_serial(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  if (M >= N) {
    pool.parallel_for(M, kBlockGrain, [&](int64_t m0, int64_t m1, int) {
      // Row block m0..m1 of op(A): rows of A, or columns when A is stored transposed.
      const float* a = trans_a ? A + m0 : A + m0 * lda;
      sgemm_serial(trans_a, trans_b, static_cast<int>(m1 - m0), N, K, alpha, a, lda, B, ldb, beta,
                   C + m0 * ldc, ldc);
    });
  } else {
    pool.parallel_for(N, kBlockGrain, [&](int64_t n0, int64_t n1, int) {
      // Column block n0..n1 of op(B): columns of B, or rows when B is stored transposed.
      const float* b = trans_b ? B + n0 * ldb : B + n0;
      sgemm_serial(trans_a, trans_b, M, static_cast<int>(n1 - n0), K, alpha, A, lda, b, ldb, beta,
                   C + n0, ldc);
    });
  }
}

}  // namespace trainctl::ops::cpu
