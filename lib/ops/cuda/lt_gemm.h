#pragma once
// Row-major fp32 GEMM through cuBLASLt: C = alpha op(A) op(B) + beta C, the contract of
// Backend::gemm. cuBLASLt is column-major, so the product is computed as
// C^T = op(B)^T op(A)^T on the same buffers (no copies).
// Computes in fp32 (CUBLAS_COMPUTE_32F) unless TF32 is allowed: then tensor cores round
// the inputs to TF32 (10-bit mantissa), about 8x faster on A100/H100 but no longer
// comparable with the CPU backend to 1e-5.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>

namespace trainctl::ops::cuda {

class LtGemm {
 public:
  explicit LtGemm(bool allow_tf32);
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  // Shapes as Backend::gemm: op(A) is MxK, op(B) KxN, all row-major with leading dims.
  // M, N, K must be positive (the backend handles empty products).
  void run(cudaStream_t stream, bool trans_a, bool trans_b, int M, int N, int K, float alpha,
           const float* A, int lda, const float* B, int ldb, float beta, float* C, int ldc);

  bool tf32() const { return allow_tf32_; }

 private:
  // The heuristic's choice per problem (shape, transposes, leading dimensions, pointer
  // alignments): asking cuBLASLt costs tens of microseconds, a training step repeats the
  // same few dozen problems.
  using ProblemKey = std::array<int64_t, 11>;
  std::map<ProblemKey, cublasLtMatmulAlgo_t> algos_;

  bool allow_tf32_;
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
};

}  // namespace trainctl::ops::cuda
