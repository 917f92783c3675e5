#pragma once
// The CUDA implementation of the op set (ops/backend.h), inside libtrainctl_cuda.so.
//
// Ordering: every op is enqueued on the device's legacy default stream, so ops run in
// call order and the NCCL communicator (comm/nccl) can order itself after them with an
// event. By default every op returns only once its results are final: the engine reads
// and writes some backend buffers on the host between ops (losses, the tied-embedding
// gradient exchange, bf16 gradient packing, checkpoints), which is only safe when no
// kernel is still writing them. The cost is one host-device round trip per op (~10 us),
// small against GPT-2-sized ops. TRAINCTL_CUDA_ASYNC=1 lets ops run ahead of the host;
// then only the ops whose results the host reads right away wait: alloc (zero-filled),
// sum_squares (returns a value), lm_head_cross_entropy and xent_finish (losses), adamw
// (end of a step). Copies into pageable host memory always complete before returning.
//
// Mixed precision (BackendOptions::matmul = bf16 or fp16): before each matrix product of
// gemm, linear_forward/backward and lm_head_cross_entropy the two fp32 operands are rounded
// (nearest even, the cast op's conversion) into 16-bit operand buffers, and cuBLASLt
// multiplies them with fp32 accumulation into the fp32 result (lt_gemm.h). The operand
// buffers come from the caching allocator, grow only and are reused by every later product.
//
// Memory comes from a caching allocator of managed memory (caching_allocator.h), so host
// code may touch backend buffers. Token and target arrays may be host or device memory:
// they are copied to device staging buffers first.
#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "ops/backend.h"
#include "ops/cuda/caching_allocator.h"
#include "ops/cuda/lt_gemm.h"

namespace trainctl::ops::cuda {

class CudaBackend final : public Backend {
 public:
  // Binds to `device` (index among visible GPUs). TF32 matrix products when the
  // environment sets TRAINCTL_CUDA_TF32=1 (off by default: results compare with the CPU).
  CudaBackend(int device, const BackendOptions& options);
  ~CudaBackend() override;

  Device device() const override { return Device::cuda; }
  int threads() const override { return threads_; }
  DType matmul_dtype() const override { return matmul_; }
  int device_index() const { return device_; }
  size_t peak_allocated_bytes() const override { return allocator_.peak_bytes(); }

  void* alloc(size_t bytes) override;
  void free(void* p) override;
  void zero(float* p, size_t n) override;
  void copy(float* dst, const float* src, size_t n) override;

  void gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
            const float* B, int ldb, float beta, float* C, int ldc) override;
  void gemm_fp32(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A,
                 int lda, const float* B, int ldb, float beta, float* C, int ldc) override;
  void linear_forward(float* out, const float* inp, const float* weight, const float* bias, int N,
                      int IC, int OC) override;
  void linear_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                       const float* inp, const float* weight, int N, int IC, int OC) override;

  void layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                         const float* weight, const float* bias, int N, int C) override;
  void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                          const float* inp, const float* weight, const float* mean,
                          const float* rstd, int N, int C) override;

  void gelu_forward(float* out, const float* inp, size_t n) override;
  void gelu_backward(float* dinp, const float* inp, const float* dout, size_t n) override;
  void add(float* out, const float* a, const float* b, size_t n) override;
  void add_inplace(float* acc, const float* x, size_t n) override;

  using Backend::attention_backward;
  using Backend::attention_forward;
  void attention_forward(float* out, float* lse, const float* qkv,
                         const AttentionShape& shape) override;
  void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out,
                          const float* lse, const AttentionShape& shape) override;
  void attention_decode(float* out, const float* q, const float* k_cache, const float* v_cache,
                        int len, int n_head, int n_kv_head, int head_dim) override;

  void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int N, int C,
                       float eps) override;
  void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp,
                        const float* weight, const float* rstd, int N, int C) override;
  void rope_forward(float* x, int B, int T, int row_stride, int heads, int head_dim, float theta,
                    int pos0) override;
  void rope_backward(float* dx, int B, int T, int row_stride, int heads, int head_dim, float theta,
                     int pos0) override;
  void swiglu_forward(float* out, const float* gate_up, int N, int H) override;
  void swiglu_backward(float* dgate_up, const float* dout, const float* gate_up, int N,
                       int H) override;

  void embedding_forward(float* out, const int32_t* tokens, const float* wte, VocabRange vocab,
                         const float* wpe, int B, int T, int C) override;
  void embedding_backward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens,
                          VocabRange vocab, int B, int T, int C) override;

  void lm_head_cross_entropy(float* losses, float* dx, float* dwte, const float* x,
                             const float* wte, const int32_t* targets, int N, int C, int V,
                             float dloss) override;

  void xent_row_max(float* row_max, const float* logits, int N, int V) override;
  void xent_partial_sums(float* stats, const float* logits, const float* row_max,
                         const int32_t* targets, VocabRange vocab, int N) override;
  void xent_finish(float* losses, float* dlogits, const float* logits, const float* row_max,
                   const float* stats, const int32_t* targets, VocabRange vocab, int N,
                   float dloss) override;

  double sum_squares(const float* x, size_t n) override;
  void scale(float* x, float s, size_t n) override;
  void adamw(float* param, const float* grad, float* m, float* v, size_t n, float lr, float beta1,
             float beta2, float eps, float weight_decay, int step) override;
  void cast(void* dst, DType dst_type, const void* src, DType src_type, size_t n) override;
  void round_to_type(float* p, size_t n, DType type) override;

 private:
  // Makes this backend's GPU current for the calling thread (ops may come from any thread).
  void bind() const;
  void synchronize() const;
  // End of an op: waits for it unless TRAINCTL_CUDA_ASYNC=1 (see the class comment).
  void op_done() const;
  // Device scratch of at least n floats (grows; contents undefined).
  float* scratch(size_t n);
  // `n` tokens (host or device memory) copied into a device staging buffer.
  const int32_t* stage_tokens(const int32_t* tokens, size_t n);

  // An operand of a matrix product as cuBLASLt reads it: row-major elements of the matmul
  // type with leading dimension `ld` (in elements).
  // M or N = 0, or K = 0 / alpha = 0 (C = beta C, done here): true when no product is left.
  bool nothing_to_multiply(int M, int N, int K, float alpha, float beta, float* C, int ldc);
  struct Operand {
    const void* data;
    int ld;
  };
  // The operand buffers: a product's A and B, and the LM head's softmax-gradient block.
  enum OperandSlot { kOperandA = 0, kOperandB = 1, kOperandLogits = 2, kOperandSlots = 3 };
  // The fp32 block src (rows x cols, leading dimension ld) as an operand: itself when the
  // matmul type is fp32, else rounded and packed into the slot's buffer (contents replaced;
  // a product enqueued earlier that reads the slot still sees its own operand, as all work
  // is ordered on one stream). Empty blocks are returned as they are.
  Operand operand(OperandSlot slot, const float* src, int rows, int cols, int ld);
  // Rows [r0, ...) of an operand.
  Operand operand_rows_from(Operand o, int r0) const;
  // C = alpha op(A) op(B) + beta C on prepared operands (shapes as Backend::gemm, M, N, K
  // positive).
  void product(bool trans_a, bool trans_b, int M, int N, int K, float alpha, Operand a, Operand b,
               float beta, float* C, int ldc);

  int device_;
  int threads_;
  DType matmul_;
  bool async_;
  cudaStream_t stream_ = cudaStreamLegacy;
  CachingAllocator allocator_;
  std::unique_ptr<LtGemm> gemm_;
  float* scratch_ = nullptr;
  size_t scratch_floats_ = 0;
  int32_t* tokens_ = nullptr;
  size_t tokens_capacity_ = 0;
  double* reduce_ = nullptr;  // kSumSqBlocks partials + 1 result
  int* bad_row_ = nullptr;    // lm_head target check
  // 16-bit operand buffers (allocator blocks, freed with the allocator) and their sizes.
  std::array<void*, kOperandSlots> operand_buffers_{};
  std::array<size_t, kOperandSlots> operand_bytes_{};
};

}  // namespace trainctl::ops::cuda
