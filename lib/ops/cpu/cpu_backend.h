#pragma once
// The CPU implementation of the op set (ops/backend.h). Methods are defined in one .cpp
// file per op family (cpu_backend.cpp, cpu_attention.cpp, ...). One backend is driven by
// one thread at a time (the worker's training loop); it fans work out to its own pool.
#include <cstddef>
#include <utility>
#include <vector>

#include "ops/backend.h"
#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/thread_pool.h"
#include "tensor/allocation_counter.h"

namespace trainctl::ops::cpu {

class CpuBackend final : public Backend {
 public:
  // Runs the hot kernels with instruction set `isa` (isa.h; IsaError if not supported).
  CpuBackend(const BackendOptions& options, Isa isa);

  Isa isa() const { return kernels_.isa; }

  Device device() const override { return Device::cpu; }
  int threads() const override { return pool_.size(); }
  DType matmul_dtype() const override { return matmul_; }

  void* alloc(size_t bytes) override;
  void free(void* p) override;
  size_t peak_allocated_bytes() const override { return allocated_.peak_bytes(); }
  void zero(float* p, size_t n) override;
  void copy(float* dst, const float* src, size_t n) override;

  void gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
            const float* B, int ldb, float beta, float* C, int ldc) override;
  void gemm_fp32(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A,
                 int lda, const float* B, int ldb, float beta, float* C, int ldc) override;
  // fp32 products with several threads: the groups are split into contiguous runs of about
  // equal work, one per thread, each product single-threaded (small products, such as one
  // expert's ~500 rows, lose more to splitting than to an uneven last run).
  void gemm_grouped(bool trans_a, bool trans_b, float alpha, float beta,
                    const std::vector<GemmGroup>& groups) override;

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

  void xent_row_max(float* row_max, const float* logits, int N, int V) override;
  void xent_partial_sums(float* stats, const float* logits, const float* row_max,
                         const int32_t* targets, VocabRange vocab, int N) override;
  void xent_finish(float* losses, float* dlogits, const float* logits, const float* row_max,
                   const float* stats, const int32_t* targets, VocabRange vocab, int N,
                   float dloss) override;

  void lm_head_cross_entropy(float* losses, float* dx, float* dwte, const float* x,
                             const float* wte, const int32_t* targets, int N, int C, int V,
                             float dloss) override;

  double sum_squares(const float* x, size_t n) override;
  void scale(float* x, float s, size_t n) override;
  void adamw(float* param, const float* grad, float* m, float* v, size_t n, float lr, float beta1,
             float beta2, float eps, float weight_decay, int step) override;

  void cast(void* dst, DType dst_type, const void* src, DType src_type, size_t n) override;
  void round_to_type(float* p, size_t n, DType type) override;
  void note_matmul_exact(const float* p, size_t n) override;
  void forget_matmul_exact(const float* p) override;

 private:
  // Thread t's private scratch of at least n floats (grows, never shrinks; contents are
  // undefined on entry). Only thread t may call this with its own index.
  float* scratch(int thread, size_t n);

  // Mixed precision (BackendOptions::matmul, cpu_matmul_operands.cpp). matmul_operand
  // returns `src` itself for fp32, else a copy of the rows x cols matrix (leading dim ld)
  // rounded to the matmul type, held in buffer `slot` until that slot is used again.
  static constexpr int kMatmulOperandSlots = 3;
  const float* matmul_operand(int slot, const float* src, int64_t rows, int64_t cols, int64_t ld);
  // dst[i] = src[i] rounded to the matmul type (dst may alias src).
  void round_to_matmul_type(float* dst, const float* src, size_t n);

  DType matmul_;
  AllocationCounter allocated_;  // alloc()/free(): the worker's tensor memory
  const CpuKernels& kernels_;
  ThreadPool pool_;
  std::vector<std::vector<float>> scratch_;
  std::vector<std::vector<float>> operands_ = std::vector<std::vector<float>>(kMatmulOperandSlots);
  // note_matmul_exact's ranges: matmul_operand reads an operand inside one in place.
  std::vector<std::pair<const float*, const float*>> exact_;
};

// Elements per thread below which memory-bound loops run on the caller alone: waking a
// worker costs about as much as streaming this many floats.
inline constexpr int64_t kElementwiseGrain = 1 << 15;

// dst[i] = src[i] rounded to nearest even in `type` and widened back (dst may alias src;
// fp32 copies). Serial: for use inside a pool task.
void round_to(DType type, float* dst, const float* src, size_t n);

}  // namespace trainctl::ops::cpu
