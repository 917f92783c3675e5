#pragma once
// Row-major sgemm helpers over OpenBLAS (which runs single-threaded: the backend sets
// openblas_set_num_threads(1) and parallelises itself).
#include "ops/cpu/thread_pool.h"

namespace trainctl::ops::cpu {

// C = alpha * op(A) op(B) + beta * C on the calling thread only.
void sgemm_serial(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A,
                  int lda, const float* B, int ldb, float beta, float* C, int ldc);

// The same, split over the pool: along M (rows of C) when M is the larger side, else along
// N; each thread runs one single-threaded sgemm on its block. Small products run serially.
void sgemm_parallel(ThreadPool& pool, bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                    const float* A, int lda, const float* B, int ldb, float beta, float* C,
                    int ldc);

}  // namespace trainctl::ops::cpu
