#pragma once
// Row-major fp32 GEMM through cuBLASLt: C = alpha op(A) op(B) + beta C, the contract of
// Backend::gemm. cuBLASLt is column-major, so the product is computed as
// C^T = op(B)^T op(A)^T on the same buffers (no copies).
// fp32 operands compute in fp32 (CUBLAS_COMPUTE_32F) unless TF32 is allowed: then tensor
// cores round the inputs to TF32 (10-bit mantissa), about 8x faster on A100/H100 but no
// longer comparable with the CPU backend to 1e-5.
// bf16 / fp16 operands (CUDA_R_16BF / CUDA_R_16F; the caller has rounded them) run on
// tensor cores with fp32 accumulation (CUBLAS_COMPUTE_32F, fp32 alpha/beta) and fp32 C/D:
// the products of two 16-bit values are exact in fp32, so only the order of the fp32 sums
// differs from the CPU backend's sgemm on the same rounded operands. TF32 plays no part.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>

#include "tensor/tensor.h"

namespace trainctl::ops::cuda {

class LtGemm {
 public:
  explicit LtGemm(bool allow_tf32);
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  // Shapes as Backend::gemm: op(A) is MxK, op(B) KxN, all row-major with leading dims
  // (in elements). M, N, K must be positive (the backend handles empty products).
  void run(cudaStream_t stream, bool trans_a, bool trans_b, int M, int N, int K, float alpha,
           const float* A, int lda, const float* B, int ldb, float beta, float* C, int ldc) {
    run(stream, DType::fp32, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  }
  // The same with A and B of `ab_type` (fp32, bf16 or fp16; both the same type); C stays
  // fp32 and alpha/beta are fp32.
  void run(cudaStream_t stream, DType ab_type, bool trans_a, bool trans_b, int M, int N, int K,
           float alpha, const void* A, int lda, const void* B, int ldb, float beta, float* C,
           int ldc);

  bool tf32() const { return allow_tf32_; }

 private:
  // The heuristic's choice per problem (operand type, shape, transposes, leading
  // dimensions, pointer alignments): asking cuBLASLt costs tens of microseconds, a training
  // step repeats the same few dozen problems.
  using ProblemKey = std::array<int64_t, 12>;
  std::map<ProblemKey, cublasLtMatmulAlgo_t> algos_;

  bool allow_tf32_;
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
};

}  // namespace trainctl::ops::cuda
