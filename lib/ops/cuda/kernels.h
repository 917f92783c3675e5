#pragma once
// Host-side launchers of the CUDA backend's kernels (defined in the *.cu files of this
// folder). Pointers are device (or managed) memory; every launcher enqueues on `stream`
// and checks the launch. Semantics are those of the Backend op of the same name
// (ops/backend.h); scratch buffers are the caller's, sized as each comment says.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "ops/backend.h"

namespace trainctl::ops::cuda {

// --- elementwise (kernels_elementwise.cu) ---------------------------------------------------
void launch_add(cudaStream_t s, float* out, const float* a, const float* b, size_t n);
void launch_scale(cudaStream_t s, float* x, float f, size_t n);
void launch_gelu_forward(cudaStream_t s, float* out, const float* inp, size_t n);
void launch_gelu_backward(cudaStream_t s, float* dinp, const float* inp, const float* dout,
                          size_t n);
void launch_adamw(cudaStream_t s, float* param, const float* grad, float* m, float* v, size_t n,
                  float lr, float beta1, float beta2, float eps, float weight_decay, int step);
void launch_cast(cudaStream_t s, void* dst, DType dst_type, const void* src, DType src_type,
                 size_t n);
// p[i] = p[i] rounded to nearest even to `type` (bf16 or fp16), kept in fp32.
void launch_round_to_type(cudaStream_t s, float* p, DType type, size_t n);
// Packs a row-major fp32 block (rows x cols, leading dimension ld_src >= cols) into a
// 16-bit operand of a matrix product: dst[r * ld_dst + c] = src[r * ld_src + c] rounded to
// nearest even to `type` (bf16 or fp16, the cast op's conversion) for c < cols, and +0 for
// cols <= c < ld_dst (padding, never read by the product). Reads only the block itself.
void launch_pack_operand(cudaStream_t s, void* dst, DType type, int ld_dst, const float* src,
                         int rows, int cols, int ld_src);
// out[r, :] = bias for r < rows (row-major, width cols).
void launch_fill_rows(cudaStream_t s, float* out, const float* bias, int rows, int cols);
// C[r, c] *= beta for an M x N block with leading dimension ldc (beta 0 writes zeros).
void launch_scale_matrix(cudaStream_t s, float* C, int M, int N, int ldc, float beta);
// dst[c] += sum over rows r of x[r * cols + c], in a fixed order (deterministic).
// partials: at least column_sum_partials(rows, cols) floats.
size_t column_sum_partials(int rows, int cols);
void launch_column_sum_add(cudaStream_t s, float* dst, const float* x, int rows, int cols,
                           float* partials);
// *result = sum of x[i]^2 in double, deterministic for a given n. partials: kSumSqBlocks.
inline constexpr int kSumSqBlocks = 1024;
void launch_sum_squares(cudaStream_t s, double* result, const float* x, size_t n, double* partials);

// --- layernorm (kernels_layernorm.cu) ---------------------------------------------------------
void launch_layernorm_forward(cudaStream_t s, float* out, float* mean, float* rstd,
                              const float* inp, const float* weight, const float* bias, int N,
                              int C);
// partials: at least layernorm_backward_partials(N, C) floats.
size_t layernorm_backward_partials(int N, int C);
void launch_layernorm_backward(cudaStream_t s, float* dinp, float* dweight, float* dbias,
                               const float* dout, const float* inp, const float* weight,
                               const float* mean, const float* rstd, int N, int C, float* partials);

// --- attention (kernels_attention.cu) ---------------------------------------------------------
// Grouped-query attention over AttentionShape's fused qkv layout (n_kv_head == n_head is
// multi-head attention). Head sizes up to kMaxHeadDim.
inline constexpr int kMaxHeadDim = 256;
void launch_attention_forward(cudaStream_t s, float* out, float* lse, const float* qkv,
                              const AttentionShape& shape);
// One token's queries q [n_head * head_dim] over caches [len, n_kv_head * head_dim].
void launch_attention_decode(cudaStream_t s, float* out, const float* q, const float* k_cache,
                             const float* v_cache, int len, int n_head, int n_kv_head,
                             int head_dim);
// scratch: B * n_head * T floats.
void launch_attention_backward(cudaStream_t s, float* dqkv, const float* dout, const float* qkv,
                               const float* out, const float* lse, const AttentionShape& shape,
                               float* scratch);

// --- Llama-family ops (kernels_llama.cu) ------------------------------------------------------
void launch_rmsnorm_forward(cudaStream_t s, float* out, float* rstd, const float* inp,
                            const float* weight, int N, int C, float eps);
// partials: at least rmsnorm_backward_partials(N, C) floats.
size_t rmsnorm_backward_partials(int N, int C);
void launch_rmsnorm_backward(cudaStream_t s, float* dinp, float* dweight, const float* dout,
                             const float* inp, const float* weight, const float* rstd, int N, int C,
                             float* partials);
// head_dim even and at most kMaxHeadDim; heads * head_dim <= row_stride.
void launch_rope_forward(cudaStream_t s, float* x, int B, int T, int row_stride, int heads,
                         int head_dim, float theta, int pos0);
void launch_rope_backward(cudaStream_t s, float* dx, int B, int T, int row_stride, int heads,
                          int head_dim, float theta, int pos0);
void launch_swiglu_forward(cudaStream_t s, float* out, const float* gate_up, int N, int H);
void launch_swiglu_backward(cudaStream_t s, float* dgate_up, const float* dout,
                            const float* gate_up, int N, int H);

// --- embedding (kernels_embedding.cu); tokens are device memory -------------------------------
void launch_embedding_forward(cudaStream_t s, float* out, const int32_t* tokens, const float* wte,
                              VocabRange vocab, const float* wpe, int B, int T, int C);
void launch_embedding_backward(cudaStream_t s, float* dwte, float* dwpe, const float* dout,
                               const int32_t* tokens, VocabRange vocab, int B, int T, int C);

// --- cross-entropy (kernels_xent.cu); targets are device memory -------------------------------
// In place over logits [n, V] (row-major): losses[i]; with backward, logits become
// dloss * (softmax - onehot) (zeros for ignored rows). A target >= V stores its row in
// *bad_row (which the caller initialises to -1).
void launch_softmax_xent_rows(cudaStream_t s, float* losses, float* logits, const int32_t* targets,
                              int n, int V, bool backward, float dloss, int* bad_row);
void launch_xent_row_max(cudaStream_t s, float* row_max, const float* logits, int N, int V);
void launch_xent_partial_sums(cudaStream_t s, float* stats, const float* logits,
                              const float* row_max, const int32_t* targets, VocabRange vocab,
                              int N);
void launch_xent_finish(cudaStream_t s, float* losses, float* dlogits, const float* logits,
                        const float* row_max, const float* stats, const int32_t* targets,
                        VocabRange vocab, int N, float dloss);

}  // namespace trainctl::ops::cuda
