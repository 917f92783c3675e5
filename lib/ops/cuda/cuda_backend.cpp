#include "ops/cuda/cuda_backend.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "cuda_abi/cuda_check.h"
#include "ops/cuda/kernels.h"
#include "ops/gemm_args.h"

namespace trainctl::ops::cuda {

namespace {

bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && std::strcmp(v, "1") == 0;
}

// Rows of logits the fused LM head materialises at once: about 256 MiB, at least one row.
int lm_head_rows_per_chunk(int N, int V) {
  const size_t budget = (size_t{256} << 20) / sizeof(float);
  const size_t rows = std::max<size_t>(1, budget / static_cast<size_t>(std::max(V, 1)));
  return static_cast<int>(std::min<size_t>(rows, static_cast<size_t>(N)));
}

}  // namespace

CudaBackend::CudaBackend(int device, const BackendOptions& options)
    : device_(device),
      threads_(std::max(1, options.threads)),
      matmul_(options.matmul),
      async_(env_flag("TRAINCTL_CUDA_ASYNC")),
      allocator_(device) {
  bind();
  gemm_ = std::make_unique<LtGemm>(env_flag("TRAINCTL_CUDA_TF32"));
  TRAINCTL_CUDA_CHECK(cudaMalloc(&reduce_, (kSumSqBlocks + 1) * sizeof(double)));
  TRAINCTL_CUDA_CHECK(cudaMalloc(&bad_row_, sizeof(int)));
}

CudaBackend::~CudaBackend() {
  // No throwing from a destructor: teardown errors are ignored (the driver reclaims all).
  cudaSetDevice(device_);
  cudaStreamSynchronize(stream_);
  cudaFree(scratch_);
  cudaFree(tokens_);
  cudaFree(reduce_);
  cudaFree(bad_row_);
}

void CudaBackend::bind() const { TRAINCTL_CUDA_CHECK(cudaSetDevice(device_)); }

void CudaBackend::synchronize() const { TRAINCTL_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

void CudaBackend::op_done() const {
  if (!async_) synchronize();
}

float* CudaBackend::scratch(size_t n) {
  if (n > scratch_floats_) {
    // cudaFree waits for the device, so no queued kernel still uses the old buffer.
    TRAINCTL_CUDA_CHECK(cudaFree(scratch_));
    scratch_ = nullptr;
    scratch_floats_ = 0;
    TRAINCTL_CUDA_CHECK(cudaMalloc(&scratch_, n * sizeof(float)));
    scratch_floats_ = n;
  }
  return scratch_;
}

const int32_t* CudaBackend::stage_tokens(const int32_t* tokens, size_t n) {
  if (n > tokens_capacity_) {
    TRAINCTL_CUDA_CHECK(cudaFree(tokens_));
    tokens_ = nullptr;
    tokens_capacity_ = 0;
    TRAINCTL_CUDA_CHECK(cudaMalloc(&tokens_, n * sizeof(int32_t)));
    tokens_capacity_ = n;
  }
  // cudaMemcpyDefault infers the direction (host, device or managed source). From pageable
  // host memory the call returns once the source has been read, so the caller may reuse it.
  TRAINCTL_CUDA_CHECK(
      cudaMemcpyAsync(tokens_, tokens, n * sizeof(int32_t), cudaMemcpyDefault, stream_));
  return tokens_;
}

CudaBackend::Operand CudaBackend::operand(OperandSlot slot, const float* src, int rows, int cols,
                                          int ld) {
  if (matmul_ == DType::fp32 || rows <= 0 || cols <= 0) return {src, ld};
  // Rows padded to 8 elements (16 bytes): the alignment tensor-core kernels want.
  const int packed_ld = (cols + 7) / 8 * 8;
  const size_t bytes = static_cast<size_t>(rows) * packed_ld * sizeof(uint16_t);
  void*& buffer = operand_buffers_[slot];
  if (bytes > operand_bytes_[slot]) {
    // Stream-ordered reuse: products already enqueued finish before the block is reused.
    allocator_.release(buffer);
    buffer = nullptr;
    operand_bytes_[slot] = 0;
    buffer = allocator_.allocate(bytes);
    operand_bytes_[slot] = bytes;
  }
  launch_pack_operand(stream_, buffer, matmul_, packed_ld, src, rows, cols, ld);
  return {buffer, packed_ld};
}

CudaBackend::Operand CudaBackend::operand_rows_from(Operand o, int r0) const {
  const size_t element = matmul_ == DType::fp32 ? sizeof(float) : sizeof(uint16_t);
  return {static_cast<const char*>(o.data) + static_cast<size_t>(r0) * o.ld * element, o.ld};
}

void CudaBackend::product(bool trans_a, bool trans_b, int M, int N, int K, float alpha, Operand a,
                          Operand b, float beta, float* C, int ldc) {
  gemm_->run(stream_, matmul_, trans_a, trans_b, M, N, K, alpha, a.data, a.ld, b.data, b.ld, beta,
             C, ldc);
}

// --- memory ------------------------------------------------------------------------------

void* CudaBackend::alloc(size_t bytes) {
  bind();
  void* p = allocator_.allocate(bytes);
  TRAINCTL_CUDA_CHECK(cudaMemsetAsync(p, 0, CachingAllocator::round_size(bytes), stream_));
  synchronize();  // the caller may initialise it on the host right away
  return p;
}

void CudaBackend::free(void* p) {
  bind();
  allocator_.release(p);  // reuse is stream-ordered: later ops run after earlier ones
}

void CudaBackend::zero(float* p, size_t n) {
  bind();
  if (n == 0) return;
  TRAINCTL_CUDA_CHECK(cudaMemsetAsync(p, 0, n * sizeof(float), stream_));
  op_done();
}

void CudaBackend::copy(float* dst, const float* src, size_t n) {
  bind();
  if (dst == src || n == 0) return;
  TRAINCTL_CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDefault, stream_));
  op_done();
}

// --- GEMM and linear ---------------------------------------------------------------------

bool CudaBackend::nothing_to_multiply(int M, int N, int K, float alpha, float beta, float* C,
                                      int ldc) {
  if (M == 0 || N == 0) return true;
  if (K != 0 && alpha != 0.0f) return false;
  if (beta != 1.0f) launch_scale_matrix(stream_, C, M, N, ldc, beta);  // C = beta C
  op_done();
  return true;
}

void CudaBackend::gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A,
                       int lda, const float* B, int ldb, float beta, float* C, int ldc) {
  bind();
  check_gemm_args(trans_a, trans_b, M, N, K, lda, ldb, ldc);
  if (nothing_to_multiply(M, N, K, alpha, beta, C, ldc)) return;
  const Operand a = operand(kOperandA, A, trans_a ? K : M, trans_a ? M : K, lda);
  const Operand b = operand(kOperandB, B, trans_b ? N : K, trans_b ? K : N, ldb);
  product(trans_a, trans_b, M, N, K, alpha, a, b, beta, C, ldc);
  op_done();
}

void CudaBackend::gemm_fp32(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                            const float* A, int lda, const float* B, int ldb, float beta, float* C,
                            int ldc) {
  bind();
  check_gemm_args(trans_a, trans_b, M, N, K, lda, ldb, ldc);
  if (nothing_to_multiply(M, N, K, alpha, beta, C, ldc)) return;
  gemm_->run(stream_, DType::fp32, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  op_done();
}

void CudaBackend::linear_forward(float* out, const float* inp, const float* weight,
                                 const float* bias, int N, int IC, int OC) {
  bind();
  float beta = 0.0f;
  if (bias != nullptr) {
    launch_fill_rows(stream_, out, bias, N, OC);
    beta = 1.0f;
  }
  gemm(false, true, N, OC, IC, 1.0f, inp, IC, weight, IC, beta, out, OC);
  op_done();
}

void CudaBackend::linear_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                                  const float* inp, const float* weight, int N, int IC, int OC) {
  bind();
  if (N > 0 && IC > 0 && OC > 0) {
    // dout is the A operand of both products: rounded once.
    const Operand d = operand(kOperandA, dout, N, OC, OC);
    if (dinp != nullptr) {
      product(false, false, N, IC, OC, 1.0f, d, operand(kOperandB, weight, OC, IC, IC), 0.0f, dinp,
              IC);
    }
    product(true, false, OC, IC, N, 1.0f, d, operand(kOperandB, inp, N, IC, IC), 1.0f, dweight, IC);
  } else {  // empty products: gemm() handles them (dinp = 0 when OC == 0)
    if (dinp != nullptr) gemm(false, false, N, IC, OC, 1.0f, dout, OC, weight, IC, 0.0f, dinp, IC);
    gemm(true, false, OC, IC, N, 1.0f, dout, OC, inp, IC, 1.0f, dweight, IC);
  }
  if (dbias != nullptr) {
    launch_column_sum_add(stream_, dbias, dout, N, OC, scratch(column_sum_partials(N, OC)));
  }
  op_done();
}

// --- layernorm, gelu, residual --------------------------------------------------------------

void CudaBackend::layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                                    const float* weight, const float* bias, int N, int C) {
  bind();
  launch_layernorm_forward(stream_, out, mean, rstd, inp, weight, bias, N, C);
  op_done();
}

void CudaBackend::layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                                     const float* inp, const float* weight, const float* mean,
                                     const float* rstd, int N, int C) {
  bind();
  launch_layernorm_backward(stream_, dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C,
                            scratch(layernorm_backward_partials(N, C)));
  op_done();
}

void CudaBackend::gelu_forward(float* out, const float* inp, size_t n) {
  bind();
  launch_gelu_forward(stream_, out, inp, n);
  op_done();
}

void CudaBackend::gelu_backward(float* dinp, const float* inp, const float* dout, size_t n) {
  bind();
  launch_gelu_backward(stream_, dinp, inp, dout, n);
  op_done();
}

void CudaBackend::add(float* out, const float* a, const float* b, size_t n) {
  bind();
  launch_add(stream_, out, a, b, n);
  op_done();
}

void CudaBackend::add_inplace(float* acc, const float* x, size_t n) {
  bind();
  launch_add(stream_, acc, acc, x, n);
  op_done();
}

// --- attention, embeddings --------------------------------------------------------------------

void CudaBackend::attention_forward(float* out, float* lse, const float* qkv,
                                    const AttentionShape& shape) {
  shape.check();
  bind();
  launch_attention_forward(stream_, out, lse, qkv, shape);
  op_done();
}

void CudaBackend::attention_backward(float* dqkv, const float* dout, const float* qkv,
                                     const float* out, const float* lse,
                                     const AttentionShape& shape) {
  shape.check();
  bind();
  const size_t rows = static_cast<size_t>(shape.B) * static_cast<size_t>(shape.n_head) * shape.T;
  launch_attention_backward(stream_, dqkv, dout, qkv, out, lse, shape, scratch(rows));
  op_done();
}

void CudaBackend::attention_decode(float* out, const float* q, const float* k_cache,
                                   const float* v_cache, int len, int n_head, int n_kv_head,
                                   int head_dim) {
  bind();
  launch_attention_decode(stream_, out, q, k_cache, v_cache, len, n_head, n_kv_head, head_dim);
  op_done();
}

// --- Llama-family ops ----------------------------------------------------------------------

void CudaBackend::rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight,
                                  int N, int C, float eps) {
  bind();
  launch_rmsnorm_forward(stream_, out, rstd, inp, weight, N, C, eps);
  op_done();
}

void CudaBackend::rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp,
                                   const float* weight, const float* rstd, int N, int C) {
  bind();
  if (N <= 0 || C <= 0) return;
  launch_rmsnorm_backward(stream_, dinp, dweight, dout, inp, weight, rstd, N, C,
                          scratch(rmsnorm_backward_partials(N, C)));
  op_done();
}

void CudaBackend::rope_forward(float* x, int B, int T, int row_stride, int heads, int head_dim,
                               float theta, int pos0) {
  bind();
  launch_rope_forward(stream_, x, B, T, row_stride, heads, head_dim, theta, pos0);
  op_done();
}

void CudaBackend::rope_backward(float* dx, int B, int T, int row_stride, int heads, int head_dim,
                                float theta, int pos0) {
  bind();
  launch_rope_backward(stream_, dx, B, T, row_stride, heads, head_dim, theta, pos0);
  op_done();
}

void CudaBackend::swiglu_forward(float* out, const float* gate_up, int N, int H) {
  bind();
  launch_swiglu_forward(stream_, out, gate_up, N, H);
  op_done();
}

void CudaBackend::swiglu_backward(float* dgate_up, const float* dout, const float* gate_up, int N,
                                  int H) {
  bind();
  launch_swiglu_backward(stream_, dgate_up, dout, gate_up, N, H);
  op_done();
}

void CudaBackend::embedding_forward(float* out, const int32_t* tokens, const float* wte,
                                    VocabRange vocab, const float* wpe, int B, int T, int C) {
  bind();
  const size_t rows = static_cast<size_t>(B) * T;
  if (rows == 0) return;
  launch_embedding_forward(stream_, out, stage_tokens(tokens, rows), wte, vocab, wpe, B, T, C);
  op_done();
}

void CudaBackend::embedding_backward(float* dwte, float* dwpe, const float* dout,
                                     const int32_t* tokens, VocabRange vocab, int B, int T, int C) {
  bind();
  const size_t rows = static_cast<size_t>(B) * T;
  if (rows == 0) return;
  launch_embedding_backward(stream_, dwte, dwpe, dout, stage_tokens(tokens, rows), vocab, B, T, C);
  op_done();
}

// --- cross-entropy --------------------------------------------------------------------------

void CudaBackend::lm_head_cross_entropy(float* losses, float* dx, float* dwte, const float* x,
                                        const float* wte, const int32_t* targets, int N, int C,
                                        int V, float dloss) {
  bind();
  if (N <= 0) return;
  if (V <= 0 || C <= 0) {
    throw std::invalid_argument("lm_head_cross_entropy: V and C must be positive");
  }
  const bool backward = dx != nullptr;
  const int32_t* t = stage_tokens(targets, static_cast<size_t>(N));
  const int rows = lm_head_rows_per_chunk(N, V);
  float* logits = scratch(static_cast<size_t>(rows) * V);
  TRAINCTL_CUDA_CHECK(cudaMemsetAsync(bad_row_, 0xff, sizeof(int), stream_));  // -1
  // wte is an operand of all three products and x of two: rounded once, not per block.
  const Operand w = operand(kOperandB, wte, V, C, C);
  const Operand xs = operand(kOperandA, x, N, C, C);
  for (int r0 = 0; r0 < N; r0 += rows) {
    const int n = std::min(rows, N - r0);
    const Operand xb = operand_rows_from(xs, r0);
    product(false, true, n, V, C, 1.0f, xb, w, 0.0f, logits, V);
    launch_softmax_xent_rows(stream_, losses + r0, logits, t + r0, n, V, backward, dloss, bad_row_);
    if (backward) {
      // The softmax-gradient block is the A operand of both backward products.
      const Operand g = operand(kOperandLogits, logits, n, V, V);
      product(false, false, n, C, V, 1.0f, g, w, 0.0f, dx + static_cast<size_t>(r0) * C, C);
      product(true, false, V, C, n, 1.0f, g, xb, 1.0f, dwte, C);
    }
  }
  int bad_row = -1;
  TRAINCTL_CUDA_CHECK(
      cudaMemcpyAsync(&bad_row, bad_row_, sizeof(int), cudaMemcpyDeviceToHost, stream_));
  synchronize();  // the caller reads `losses` on the host next
  if (bad_row >= 0) {
    int32_t target = 0;
    TRAINCTL_CUDA_CHECK(cudaMemcpy(&target, t + bad_row, sizeof(int32_t), cudaMemcpyDeviceToHost));
    throw std::out_of_range("lm_head_cross_entropy: target " + std::to_string(target) + " at row " +
                            std::to_string(bad_row) + " is outside the vocabulary of " +
                            std::to_string(V));
  }
}

void CudaBackend::xent_row_max(float* row_max, const float* logits, int N, int V) {
  bind();
  launch_xent_row_max(stream_, row_max, logits, N, V);
  op_done();
}

void CudaBackend::xent_partial_sums(float* stats, const float* logits, const float* row_max,
                                    const int32_t* targets, VocabRange vocab, int N) {
  bind();
  if (N <= 0) return;
  launch_xent_partial_sums(stream_, stats, logits, row_max,
                           stage_tokens(targets, static_cast<size_t>(N)), vocab, N);
  op_done();
}

void CudaBackend::xent_finish(float* losses, float* dlogits, const float* logits,
                              const float* row_max, const float* stats, const int32_t* targets,
                              VocabRange vocab, int N, float dloss) {
  bind();
  if (N <= 0) return;
  launch_xent_finish(stream_, losses, dlogits, logits, row_max, stats,
                     stage_tokens(targets, static_cast<size_t>(N)), vocab, N, dloss);
  synchronize();  // the caller reads `losses` on the host next
}

// --- optimizer, reductions, casts -------------------------------------------------------------

double CudaBackend::sum_squares(const float* x, size_t n) {
  bind();
  if (n == 0) return 0.0;
  launch_sum_squares(stream_, reduce_ + kSumSqBlocks, x, n, reduce_);
  double result = 0.0;
  TRAINCTL_CUDA_CHECK(cudaMemcpyAsync(&result, reduce_ + kSumSqBlocks, sizeof(double),
                                      cudaMemcpyDeviceToHost, stream_));
  synchronize();
  return result;
}

void CudaBackend::scale(float* x, float s, size_t n) {
  bind();
  launch_scale(stream_, x, s, n);
  op_done();
}

void CudaBackend::adamw(float* param, const float* grad, float* m, float* v, size_t n, float lr,
                        float beta1, float beta2, float eps, float weight_decay, int step) {
  bind();
  if (step < 1) {
    throw std::invalid_argument("adamw: step is 1-based, got " + std::to_string(step));
  }
  launch_adamw(stream_, param, grad, m, v, n, lr, beta1, beta2, eps, weight_decay, step);
  synchronize();  // end of a step: checkpoints and exports read parameters on the host
}

void CudaBackend::cast(void* dst, DType dst_type, const void* src, DType src_type, size_t n) {
  bind();
  if (n == 0) return;
  if (dst_type == src_type) {
    if (dst != src) {
      const size_t w = dst_type == DType::fp32 ? 4 : 2;
      TRAINCTL_CUDA_CHECK(cudaMemcpyAsync(dst, src, n * w, cudaMemcpyDefault, stream_));
    }
    op_done();
    return;
  }
  launch_cast(stream_, dst, dst_type, src, src_type, n);
  op_done();
}

void CudaBackend::round_to_type(float* p, size_t n, DType type) {
  bind();
  if (n == 0 || type == DType::fp32) return;
  launch_round_to_type(stream_, p, type, n);
  op_done();
}

}  // namespace trainctl::ops::cuda
