#pragma once
// The fixed op set (DESIGN.md), forward and backward, behind one interface so the model
// is written once and runs on the CPU backend (ops/cpu: OpenBLAS + a thread pool) and
// later the CUDA backend (ops/cuda). llm.c-style: raw pointers to contiguous row-major
// fp32 buffers in the backend's device memory, shapes passed explicitly.
//
// Gradient conventions (every backward below follows them):
//   - parameter gradients ACCUMULATE (+=) so micro-batches add up without copies;
//   - input (activation) gradients are OVERWRITTEN (=) unless the name says `_acc`.
// Linear layers use nn.Linear's layout: weight [out, in], y = x W^T + b.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace trainctl::ops {

// The rows [begin, begin + count) of the full vocabulary held by a vocab-parallel token
// embedding (the whole vocabulary without tensor parallelism).
struct VocabRange {
  int begin = 0;
  int count = 0;
  bool holds(int32_t token) const { return token >= begin && token < begin + count; }
};

// Causal self-attention over a fused qkv buffer [B, T, qkv_width()]: q (n_head heads),
// then k and v (n_kv_head heads each), head_dim floats a head. Grouped-query attention
// (Llama 2/3) shares each k/v head among n_head / n_kv_head consecutive query heads: query
// head h reads k/v head h / (n_head / n_kv_head). n_kv_head == n_head is multi-head
// attention, and then the layout is nanoGPT's c_attn output.
struct AttentionShape {
  int B = 0;
  int T = 0;
  int n_head = 0;
  int n_kv_head = 0;
  int head_dim = 0;

  int q_width() const { return n_head * head_dim; }
  int kv_width() const { return n_kv_head * head_dim; }
  int qkv_width() const { return q_width() + 2 * kv_width(); }
  int group() const { return n_head / n_kv_head; }  // query heads per k/v head

  // Throws std::invalid_argument unless every size is positive and n_kv_head divides n_head.
  void check() const {
    if (B < 0 || T <= 0 || head_dim <= 0 || n_head <= 0 || n_kv_head <= 0 ||
        n_head % n_kv_head != 0) {
      throw std::invalid_argument("attention: bad shape B=" + std::to_string(B) +
                                  " T=" + std::to_string(T) + " n_head=" + std::to_string(n_head) +
                                  " n_kv_head=" + std::to_string(n_kv_head) +
                                  " head_dim=" + std::to_string(head_dim) +
                                  " (B >= 0, the others positive, n_kv_head dividing n_head)");
    }
  }
  // Multi-head attention of width C; throws std::invalid_argument unless NH divides C.
  static AttentionShape multi_head(int B, int T, int C, int NH) {
    if (NH <= 0 || C % NH != 0) {
      throw std::invalid_argument("attention: C=" + std::to_string(C) +
                                  " is not divisible by NH=" + std::to_string(NH));
    }
    AttentionShape s{B, T, NH, NH, C / NH};
    s.check();
    return s;
  }
};

struct BackendOptions {
  int threads = 1;  // compute threads for this worker (one process per device slot)
  // Mixed precision for matrix products: the two operands of every product in gemm,
  // linear_forward/backward and lm_head_cross_entropy are rounded (to nearest even) to
  // this type, the products accumulate in fp32 and results are stored in fp32. The kernels
  // take and give fp32 everywhere else (attention, layernorm, softmax, bias sums); the
  // trainer stores the weights in this type (parallel/mixed_params.h). fp32 = no rounding. bf16
  // keeps fp32's exponent range; fp16 has three more mantissa bits but overflows above 65504 and
  // flushes below 6e-8, so gradients need loss scaling.
  DType matmul = DType::fp32;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  virtual int threads() const = 0;
  virtual DType matmul_dtype() const = 0;  // BackendOptions::matmul

  // --- memory ------------------------------------------------------------------------
  virtual void* alloc(size_t bytes) = 0;  // zero-filled, 64-byte aligned
  virtual void free(void* p) = 0;
  // The most bytes alloc() has had handed out at once so far (requested sizes rounded up
  // to the allocator's granule: 64 bytes on the CPU, the caching allocator's block sizes
  // on CUDA). This is the "tensor memory" a worker reports as mem_peak_mb and that
  // `trainctl plan` estimates: deterministic for a given job and layout.
  virtual size_t peak_allocated_bytes() const = 0;
  virtual void zero(float* p, size_t n) = 0;
  virtual void copy(float* dst, const float* src, size_t n) = 0;

  // --- GEMM (row-major) C = alpha * op(A) op(B) + beta * C; op(A) is MxK, op(B) KxN ----
  virtual void gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A,
                    int lda, const float* B, int ldb, float beta, float* C, int ldc) = 0;

  // The same product with fp32 operands whatever BackendOptions::matmul: attention's own
  // products (Q K^T, P V and their gradients), which the fused attention kernels keep in
  // fp32 as well; ring attention's blocks (model/attention_blocks.h) use it so that a
  // context-parallel run rounds what a single worker rounds, no more.
  virtual void gemm_fp32(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                         const float* A, int lda, const float* B, int ldb, float beta, float* C,
                         int ldc) = 0;

  // --- grouped GEMM: one product per group, as an MoE layer's experts --------------------
  // For each group g: C_g = alpha * op(A_g) op(B_g) + beta * C_g (gemm's rules, M_g may be
  // 0). The outputs must not overlap: a backend may run the groups in any order and at
  // once. The default runs them one after another through gemm().
  struct GemmGroup {
    int M = 0, N = 0, K = 0;
    const float* A = nullptr;
    int lda = 0;
    const float* B = nullptr;
    int ldb = 0;
    float* C = nullptr;
    int ldc = 0;
  };
  virtual void gemm_grouped(bool trans_a, bool trans_b, float alpha, float beta,
                            const std::vector<GemmGroup>& groups) {
    for (const GemmGroup& g : groups) {
      if (g.M > 0 && g.N > 0) {
        gemm(trans_a, trans_b, g.M, g.N, g.K, alpha, g.A, g.lda, g.B, g.ldb, beta, g.C, g.ldc);
      }
    }
  }

  // --- linear: out[N,OC] = inp[N,IC] @ weight[OC,IC]^T + bias[OC] (bias may be null) ---
  virtual void linear_forward(float* out, const float* inp, const float* weight, const float* bias,
                              int N, int IC, int OC) = 0;
  // dinp (=, may be null), dweight (+=), dbias (+=, may be null).
  virtual void linear_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                               const float* inp, const float* weight, int N, int IC, int OC) = 0;

  // --- layernorm over the last dim C; mean/rstd [N] saved for backward ----------------
  virtual void layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                                 const float* weight, const float* bias, int N, int C) = 0;
  // dinp (=), dweight (+=), dbias (+=).
  virtual void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                                  const float* inp, const float* weight, const float* mean,
                                  const float* rstd, int N, int C) = 0;

  // --- GELU, tanh approximation (GPT-2) -----------------------------------------------
  virtual void gelu_forward(float* out, const float* inp, size_t n) = 0;
  virtual void gelu_backward(float* dinp, const float* inp, const float* dout, size_t n) = 0;

  // --- residual: out = a + b (out may alias a or b) ------------------------------------
  virtual void add(float* out, const float* a, const float* b, size_t n) = 0;
  // acc += x
  virtual void add_inplace(float* acc, const float* x, size_t n) = 0;

  // --- causal self-attention, fused and memory-lean ----------------------------------
  // qkv [B, T, shape.qkv_width()] as (q | k | v) along the last dim (AttentionShape).
  // out [B, T, shape.q_width()]. lse [B, n_head, T] receives each query row's log-sum-exp
  // of the scaled scores: backward recomputes probabilities from it instead of keeping a
  // T×T matrix per head.
  virtual void attention_forward(float* out, float* lse, const float* qkv,
                                 const AttentionShape& shape) = 0;
  // dqkv (=) from dout, the forward's inputs and outputs. Under grouped-query attention a
  // k/v head's gradient is the sum over the query heads that share it.
  virtual void attention_backward(float* dqkv, const float* dout, const float* qkv,
                                  const float* out, const float* lse,
                                  const AttentionShape& shape) = 0;
  // One new token's attention over a key/value cache (incremental decoding): q
  // [n_head * head_dim] its queries; k_cache and v_cache [len, n_kv_head * head_dim]
  // row-major, positions 0..len-1, the new token's own keys and values last. out
  // [n_head * head_dim]. Query head h reads k/v head h / (n_head / n_kv_head); scores are
  // scaled by 1/sqrt(head_dim). The same result as attention_forward's last row over the
  // whole sequence, in O(len) instead of O(len^2).
  virtual void attention_decode(float* out, const float* q, const float* k_cache,
                                const float* v_cache, int len, int n_head, int n_kv_head,
                                int head_dim) = 0;
  // Multi-head attention (GPT): C = NH * head size, nanoGPT's c_attn output [B, T, 3C].
  void attention_forward(float* out, float* lse, const float* qkv, int B, int T, int C, int NH) {
    attention_forward(out, lse, qkv, AttentionShape::multi_head(B, T, C, NH));
  }
  void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out,
                          const float* lse, int B, int T, int C, int NH) {
    attention_backward(dqkv, dout, qkv, out, lse, AttentionShape::multi_head(B, T, C, NH));
  }

  // --- Llama-family ops ----------------------------------------------------------------
  // RMSNorm over the last dim C: out = inp * rstd * weight with
  // rstd[N] = 1 / sqrt(mean(inp^2) + eps), saved for backward.
  virtual void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight,
                               int N, int C, float eps) = 0;
  // dinp (=), dweight (+=).
  virtual void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp,
                                const float* weight, const float* rstd, int N, int C) = 0;
  // Rotary position embedding, IN PLACE, in Hugging Face Llama's convention ("rotate_half"):
  // within a head, dimension i < head_dim/2 pairs with i + head_dim/2 and both rotate by
  // the angle (pos0 + t) * theta^(-2i / head_dim), t = the row's position in its sequence.
  // x holds B*T rows of `row_stride` floats; the first `heads` heads (head_dim floats each)
  // of every row are rotated: pass the qkv buffer with heads = n_head + n_kv_head to
  // rotate q and k together. pos0 offsets positions (decoding with a KV cache).
  virtual void rope_forward(float* x, int B, int T, int row_stride, int heads, int head_dim,
                            float theta, int pos0) = 0;
  // The gradient through rope_forward, in place: dx = R^T dy (the inverse rotation).
  virtual void rope_backward(float* dx, int B, int T, int row_stride, int heads, int head_dim,
                             float theta, int pos0) = 0;
  // SwiGLU: gate_up [N, 2H] as (gate | up) along the last dim;
  // out [N, H] = silu(gate) * up, silu(g) = g / (1 + exp(-g)).
  virtual void swiglu_forward(float* out, const float* gate_up, int N, int H) = 0;
  // dgate_up (=) [N, 2H] from dout [N, H] and the forward's input.
  virtual void swiglu_backward(float* dgate_up, const float* dout, const float* gate_up, int N,
                               int H) = 0;

  // --- embeddings: out[B,T,C] = wte[tokens] + wpe[t] -----------------------------------
  // wte holds the vocabulary rows of `vocab` (row 0 = token vocab.begin); tokens outside
  // it contribute zeros (their rows live on another TP rank). wpe may be null (only one
  // TP rank adds the positions before the sum over the group).
  virtual void embedding_forward(float* out, const int32_t* tokens, const float* wte,
                                 VocabRange vocab, const float* wpe, int B, int T, int C) = 0;
  // dwte (+=, rows of `vocab` only), dwpe (+=, may be null).
  virtual void embedding_backward(float* dwte, float* dwpe, const float* dout,
                                  const int32_t* tokens, VocabRange vocab, int B, int T, int C) = 0;

  // --- LM head fused with softmax cross-entropy ------------------------------------------
  // logits = x[N,C] @ wte[V,C]^T are produced a block of rows at a time and never kept:
  // losses[N] = -log softmax(logits)[target] (targets < 0 are ignored: loss 0, no grad).
  // If dx != null also backpropagates the loss sum scaled by `dloss`:
  //   dx (=) [N,C], dwte (+=) [V,C].
  virtual void lm_head_cross_entropy(float* losses, float* dx, float* dwte, const float* x,
                                     const float* wte, const int32_t* targets, int N, int C, int V,
                                     float dloss) = 0;

  // --- vocab-parallel cross-entropy ----------------------------------------------------
  // Megatron's split: each TP rank holds logits [N, vocab.count] for its vocabulary rows;
  // the caller sums/maxes the small per-row statistics over the TP group between calls,
  // so the full [N, V] logits never exist on one rank.
  // row_max[i] = max over this rank's columns of logits[i, :].
  virtual void xent_row_max(float* row_max, const float* logits, int N, int V) = 0;
  // With the group's row max: stats[2i] = sum_j exp(logits[i, j] - row_max[i]) and
  // stats[2i + 1] = the target's logit if this rank holds it, else 0.
  virtual void xent_partial_sums(float* stats, const float* logits, const float* row_max,
                                 const int32_t* targets, VocabRange vocab, int N) = 0;
  // With stats summed over the group: losses[i] = row_max + log(sum) - target logit
  // (0 for targets < 0). If dlogits != null it receives (it may alias logits)
  // dloss * (softmax - onehot) for this rank's columns (zeros for ignored rows).
  virtual void xent_finish(float* losses, float* dlogits, const float* logits, const float* row_max,
                           const float* stats, const int32_t* targets, VocabRange vocab, int N,
                           float dloss) = 0;

  // --- optimizer and reductions --------------------------------------------------------
  // Sum of squares of n floats, accumulated in double.
  virtual double sum_squares(const float* x, size_t n) = 0;
  // x *= s
  virtual void scale(float* x, float s, size_t n) = 0;
  // AdamW with decoupled weight decay; `step` is 1-based (bias correction).
  virtual void adamw(float* param, const float* grad, float* m, float* v, size_t n, float lr,
                     float beta1, float beta2, float eps, float weight_decay, int step) = 0;

  // --- casts ---------------------------------------------------------------------------
  virtual void cast(void* dst, DType dst_type, const void* src, DType src_type, size_t n) = 0;
  // p[i] rounded to nearest even to `type` and kept in fp32: what storing it in `type` and
  // reading it back gives (the 16-bit kept activations, model/activation_arena.h). fp32:
  // nothing.
  virtual void round_to_type(float* p, size_t n, DType type) = 0;
  // A promise: whenever a matrix product reads [p, p + n), every value there is already
  // representable in the matmul type (the mixed-precision layout widens 16-bit weights
  // into such a buffer, parallel/mixed_params.h). A backend that rounds operands into a
  // copy may then read them in place: the same values, without the copy. Until
  // forget_matmul_exact(p), which the owner calls before freeing the buffer. The default
  // ignores both.
  virtual void note_matmul_exact(const float* p, size_t n) {
    (void)p;
    (void)n;
  }
  virtual void forget_matmul_exact(const float* p) { (void)p; }
};

// The CPU backend: OpenBLAS sgemm driven from the backend's own thread pool (OpenBLAS
// itself runs single-threaded inside it, so two pools never spin against each other).
std::unique_ptr<Backend> make_cpu_backend(const BackendOptions& options);

}  // namespace trainctl::ops
