#include "ops/cuda/lt_gemm.h"

#include <cstdint>
#include <stdexcept>
#include <string>

#include "cuda_abi/cuda_check.h"
#include "util/dtype.h"  // header-only: the plugin links no trainctl library

namespace trainctl::ops::cuda {

namespace {

// 32 MiB: what cuBLASLt's Hopper kernels ask for at most (NVIDIA's recommendation).
constexpr size_t kWorkspaceBytes = size_t{32} << 20;

// The alignment cuBLASLt may assume for a pointer: the largest power of two (<= 256) that
// divides its address, at least the element size. Kernels that need more are excluded by
// the heuristic.
uint32_t alignment_of(const void* p, uint32_t element_bytes) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  uint32_t align = 256;
  while (align > element_bytes && (a % align) != 0) align /= 2;
  return align;
}

// The cuBLASLt element type of A and B for an operand type.
cudaDataType_t operand_type(DType t) {
  switch (t) {
    case DType::fp32:
      return CUDA_R_32F;
    case DType::bf16:
      return CUDA_R_16BF;
    case DType::fp16:
      return CUDA_R_16F;
  }
  throw std::invalid_argument("LtGemm: unknown operand type " +
                              std::to_string(static_cast<int>(t)));
}

// RAII for the per-call descriptors.
struct MatmulDescriptors {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~MatmulDescriptors() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

}  // namespace

LtGemm::LtGemm(bool allow_tf32) : allow_tf32_(allow_tf32) {
  TRAINCTL_CUBLAS_CHECK(cublasLtCreate(&handle_));
  workspace_bytes_ = kWorkspaceBytes;
  const cudaError_t e = cudaMalloc(&workspace_, workspace_bytes_);
  if (e != cudaSuccess) {
    cublasLtDestroy(handle_);
    cuda_abi::throw_call_error("cudaMalloc(&workspace_, workspace_bytes_)", __FILE__, __LINE__,
                               cuda_abi::cuda_error_text(e));
  }
}

LtGemm::~LtGemm() {
  cudaFree(workspace_);
  cublasLtDestroy(handle_);
}

void LtGemm::run(cudaStream_t stream, DType ab_type, bool trans_a, bool trans_b, int M, int N,
                 int K, float alpha, const void* A, int lda, const void* B, int ldb, float beta,
                 float* C, int ldc) {
  // Column-major view: C' (N x M, ldc) = opA'(B) (N x K) * opB'(A) (K x M).
  // A row-major X (r x c, ld) read column-major is X^T (c x r, ld).
  const cublasOperation_t op_first = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_second = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  // Stored shapes (before the op) in column-major terms.
  const uint64_t first_rows = trans_b ? K : N, first_cols = trans_b ? N : K;
  const uint64_t second_rows = trans_a ? M : K, second_cols = trans_a ? K : M;
  const cudaDataType_t ab = operand_type(ab_type);
  const uint32_t ab_bytes = ab_type == DType::fp32 ? 4 : 2;

  MatmulDescriptors d;
  // 16-bit operands: tensor cores with fp32 accumulation. fp32 operands: fp32, or TF32
  // tensor cores when allowed.
  const cublasComputeType_t compute =
      ab_type == DType::fp32 && allow_tf32_ ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  TRAINCTL_CUBLAS_CHECK(cublasLtMatmulDescCreate(&d.op, compute, CUDA_R_32F));
  TRAINCTL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSA, &op_first,
                                                       sizeof op_first));
  TRAINCTL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSB,
                                                       &op_second, sizeof op_second));
  TRAINCTL_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&d.a, ab, first_rows, first_cols, ldb));
  TRAINCTL_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&d.b, ab, second_rows, second_cols, lda));
  TRAINCTL_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&d.c, CUDA_R_32F, N, M, ldc));

  TRAINCTL_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&d.pref));
  TRAINCTL_CUBLAS_CHECK(
      cublasLtMatmulPreferenceSetAttribute(d.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                           &workspace_bytes_, sizeof workspace_bytes_));
  const uint32_t align_first = alignment_of(B, ab_bytes), align_second = alignment_of(A, ab_bytes);
  const uint32_t align_c = alignment_of(C, sizeof(float));
  TRAINCTL_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_first, sizeof align_first));
  TRAINCTL_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_second, sizeof align_second));
  TRAINCTL_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c, sizeof align_c));
  TRAINCTL_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_c, sizeof align_c));

  const ProblemKey key = {static_cast<int64_t>(ab_type),
                          trans_a,
                          trans_b,
                          M,
                          N,
                          K,
                          lda,
                          ldb,
                          ldc,
                          align_first,
                          align_second,
                          align_c};
  auto it = algos_.find(key);
  if (it == algos_.end()) {
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    TRAINCTL_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(handle_, d.op, d.a, d.b, d.c, d.c, d.pref,
                                                         1, &result, &found));
    if (found == 0) {
      throw std::runtime_error(
          std::string("cuBLASLt has no algorithm for gemm with ") + dtype_name(ab_type) +
          " operands and fp32 results, M=" + std::to_string(M) + " N=" + std::to_string(N) +
          " K=" + std::to_string(K) + " (trans_a=" + std::to_string(trans_a) +
          ", trans_b=" + std::to_string(trans_b) + ", lda=" + std::to_string(lda) +
          ", ldb=" + std::to_string(ldb) + ", ldc=" + std::to_string(ldc) + ")");
    }
    it = algos_.emplace(key, result.algo).first;
  }
  TRAINCTL_CUBLAS_CHECK(cublasLtMatmul(handle_, d.op, &alpha, B, d.a, A, d.b, &beta, C, d.c, C, d.c,
                                       &it->second, workspace_, workspace_bytes_, stream));
}

}  // namespace trainctl::ops::cuda
