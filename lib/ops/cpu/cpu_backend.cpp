#include "ops/cpu/cpu_backend.h"

#include <cblas.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>

#include "ops/cpu/sgemm.h"
#include "ops/gemm_args.h"

namespace trainctl::ops::cpu {

CpuBackend::CpuBackend(const BackendOptions& options, Isa isa)
    : matmul_(options.matmul),
      kernels_(cpu_kernels(choose_isa(isa_name(isa)))),
      pool_(options.threads),
      scratch_(static_cast<size_t>(std::max(options.threads, 1))) {
  // OpenBLAS's own pthread pool would spin against ours (NOTES.md, "CPU ceilings"): every
  // sgemm runs single-threaded inside one of our threads instead.
  openblas_set_num_threads(1);
}

float* CpuBackend::scratch(int thread, size_t n) {
  auto& s = scratch_[static_cast<size_t>(thread)];
  if (s.size() < n) s.resize(n);
  return s.data();
}

// --- memory ----------------------------------------------------------------------------

void* CpuBackend::alloc(size_t bytes) {
  const size_t padded = std::max<size_t>(64, (bytes + 63) / 64 * 64);
  void* p = std::aligned_alloc(64, padded);
  if (p == nullptr) throw std::bad_alloc();
  std::memset(p, 0, padded);
  allocated_.allocated(p, padded);
  return p;
}

void CpuBackend::free(void* p) {
  allocated_.freed(p);
  std::free(p);
}

void CpuBackend::zero(float* p, size_t n) {
  pool_.parallel_for(static_cast<int64_t>(n), kElementwiseGrain * 8,
                     [&](int64_t b, int64_t e, int) {
                       std::memset(p + b, 0, static_cast<size_t>(e - b) * sizeof(float));
                     });
}

void CpuBackend::copy(float* dst, const float* src, size_t n) {
  if (dst == src) return;
  pool_.parallel_for(static_cast<int64_t>(n), kElementwiseGrain * 8,
                     [&](int64_t b, int64_t e, int) {
                       std::memmove(dst + b, src + b, static_cast<size_t>(e - b) * sizeof(float));
                     });
}

// --- elementwise -----------------------------------------------------------------------

void CpuBackend::add(float* out, const float* a, const float* b, size_t n) {
  pool_.parallel_for(static_cast<int64_t>(n), kElementwiseGrain, [&](int64_t s, int64_t e, int) {
    for (int64_t i = s; i < e; ++i) out[i] = a[i] + b[i];
  });
}

void CpuBackend::add_inplace(float* acc, const float* x, size_t n) {
  pool_.parallel_for(static_cast<int64_t>(n), kElementwiseGrain, [&](int64_t s, int64_t e, int) {
    for (int64_t i = s; i < e; ++i) acc[i] += x[i];
  });
}

void CpuBackend::scale(float* x, float s, size_t n) {
  pool_.parallel_for(static_cast<int64_t>(n), kElementwiseGrain, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) x[i] *= s;
  });
}

double CpuBackend::sum_squares(const float* x, size_t n) {
  std::vector<double> partial(static_cast<size_t>(pool_.size()), 0.0);
  pool_.parallel_for(static_cast<int64_t>(n), kElementwiseGrain, [&](int64_t b, int64_t e, int t) {
    // Eight independent double lanes: vectorises, and keeps the double accumulation exact
    // enough for global-norm clipping over hundreds of millions of values.
    double lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = b;
    for (; i + 8 <= e; i += 8) {
      for (int k = 0; k < 8; ++k) {
        const double v = x[i + k];
        lanes[k] += v * v;
      }
    }
    double s = 0.0;
    for (; i < e; ++i) s += static_cast<double>(x[i]) * x[i];
    for (double l : lanes) s += l;
    partial[static_cast<size_t>(t)] = s;
  });
  double total = 0.0;
  for (double p : partial) total += p;
  return total;
}

// --- GEMM and linear -------------------------------------------------------------------

void CpuBackend::gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A,
                      int lda, const float* B, int ldb, float beta, float* C, int ldc) {
  check_gemm_args(trans_a, trans_b, M, N, K, lda, ldb, ldc);
  A = matmul_operand(0, A, trans_a ? K : M, trans_a ? M : K, lda);
  B = matmul_operand(1, B, trans_b ? N : K, trans_b ? K : N, ldb);
  sgemm_parallel(pool_, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void CpuBackend::gemm_fp32(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                           const float* A, int lda, const float* B, int ldb, float beta, float* C,
                           int ldc) {
  check_gemm_args(trans_a, trans_b, M, N, K, lda, ldb, ldc);
  sgemm_parallel(pool_, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void CpuBackend::gemm_grouped(bool trans_a, bool trans_b, float alpha, float beta,
                              const std::vector<GemmGroup>& groups) {
  // Rounded operands (bf16/fp16) go through gemm(): matmul_operand's staging buffers are
  // shared by the calls.
  if (matmul_ != DType::fp32 || pool_.size() == 1 || groups.size() < 2) {
    Backend::gemm_grouped(trans_a, trans_b, alpha, beta, groups);
    return;
  }
  std::vector<double> work_before(groups.size() + 1, 0.0);  // prefix sums of M N K
  for (size_t g = 0; g < groups.size(); ++g) {
    const GemmGroup& p = groups[g];
    check_gemm_args(trans_a, trans_b, p.M, p.N, p.K, p.lda, p.ldb, p.ldc);
    work_before[g + 1] = work_before[g] + double{1} * p.M * p.N * p.K;
  }
  const double total = work_before.back();
  const int threads = pool_.size();
  // Thread t runs the groups whose work midpoint lies in [t, t + 1) * total / threads.
  pool_.run_on_all([&](int t) {
    for (size_t g = 0; g < groups.size(); ++g) {
      const double mid = (work_before[g] + work_before[g + 1]) / 2;
      const int owner = total > 0 ? std::min(threads - 1, static_cast<int>(mid / total * threads))
                                  : static_cast<int>(g) % threads;
      const GemmGroup& p = groups[g];
      if (owner != t || p.M == 0 || p.N == 0) continue;
      sgemm_serial(trans_a, trans_b, p.M, p.N, p.K, alpha, p.A, p.lda, p.B, p.ldb, beta, p.C,
                   p.ldc);
    }
  });
}

void CpuBackend::linear_forward(float* out, const float* inp, const float* weight,
                                const float* bias, int N, int IC, int OC) {
  inp = matmul_operand(0, inp, N, IC, IC);
  weight = matmul_operand(1, weight, OC, IC, IC);
  if (bias == nullptr) {
    sgemm_parallel(pool_, false, true, N, OC, IC, 1.0f, inp, IC, weight, IC, 0.0f, out, OC);
    return;
  }
  // Each thread writes the bias into its own rows right before its sgemm accumulates onto
  // them, while those rows are still in cache.
  const int64_t grain = std::max<int64_t>(32, (int64_t{1} << 20) / std::max(1, IC * OC));
  pool_.parallel_for(N, grain, [&](int64_t r0, int64_t r1, int) {
    for (int64_t r = r0; r < r1; ++r) {
      float* o = out + r * OC;
      for (int j = 0; j < OC; ++j) o[j] = bias[j];
    }
    sgemm_serial(false, true, static_cast<int>(r1 - r0), OC, IC, 1.0f, inp + r0 * IC, IC, weight,
                 IC, 1.0f, out + r0 * OC, OC);
  });
}

void CpuBackend::linear_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                                 const float* inp, const float* weight, int N, int IC, int OC) {
  // The bias gradient sums the unrounded dout; only the products see rounded operands.
  const float* dout_r = matmul_operand(0, dout, N, OC, OC);
  if (dinp != nullptr) {
    // dinp[N,IC] = dout[N,OC] @ weight[OC,IC]
    weight = matmul_operand(1, weight, OC, IC, IC);
    sgemm_parallel(pool_, false, false, N, IC, OC, 1.0f, dout_r, OC, weight, IC, 0.0f, dinp, IC);
  }
  inp = matmul_operand(2, inp, N, IC, IC);
  // dweight[OC,IC] += dout^T @ inp, split over output features; the thread that owns
  // features o0..o1 also sums their bias gradient, so no partial buffers are needed.
  const int64_t grain = std::max<int64_t>(32, (int64_t{1} << 20) / std::max(1, IC * N));
  pool_.parallel_for(OC, grain, [&](int64_t o0, int64_t o1, int) {
    const int width = static_cast<int>(o1 - o0);
    sgemm_serial(true, false, width, IC, N, 1.0f, dout_r + o0, OC, inp, IC, 1.0f, dweight + o0 * IC,
                 IC);
    if (dbias != nullptr) {
      float* db = dbias + o0;
      for (int r = 0; r < N; ++r) {
        const float* d = dout + static_cast<int64_t>(r) * OC + o0;
        for (int j = 0; j < width; ++j) db[j] += d[j];
      }
    }
  });
}

}  // namespace trainctl::ops::cpu

namespace trainctl::ops {

std::unique_ptr<Backend> make_cpu_backend(const BackendOptions& options) {
  return std::make_unique<cpu::CpuBackend>(options, cpu::isa_from_environment());
}

}  // namespace trainctl::ops
