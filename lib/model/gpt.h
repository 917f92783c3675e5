#pragma once
// The decoder-only transformer with explicit forward and backward (no autograd), in the
// families of model/model_config.h: nanoGPT's GPT (learned positions, pre-LayerNorm
// blocks, 4x MLP with tanh-GELU, biases everywhere, LM head tied to the token embedding;
// nanoGPT's names and layouts) and Llama (RMSNorm, RoPE, SwiGLU, grouped-query attention,
// no biases, untied head by default; Hugging Face's names and layouts). Both share the
// block structure, slots, recomputation, pipeline chunks, gradient pieces and tensor
// parallelism below; only the ops inside a block differ.
//
// One object holds one rank's shard of the model (model/shard.h):
//   - pipeline parallelism: some contiguous ranges of blocks ("chunks": one per pipeline
//     stage the rank runs; several for the interleaved schedule), plus the embedding on the
//     first stage and ln_f + LM head on the last;
//   - tensor parallelism (Megatron): attention heads and MLP columns split over the TP group
//     (column-parallel c_attn / c_fc, row-parallel c_proj with a TP allreduce of their
//     outputs in forward and of the column-parallel layers' input gradients in backward),
//     vocab-parallel embedding and cross-entropy (the [N, V] logits are never gathered).
//     Replicated parameters (LayerNorms, row-parallel biases, wpe) get identical gradients on
//     every TP rank because their inputs are identical after each allreduce.
// Activations of several micro-batches in flight live in "slots" (one per micro-batch a
// pipeline schedule keeps between its forward and its backward).
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "model/model_config.h"
#include "model/parameters.h"
#include "model/shard.h"
#include "observe/trace_recorder.h"
#include "ops/backend.h"

namespace trainctl::model {

// Activation recomputation (training.activation_checkpointing): what each block keeps from
// its forward for its backward. Recomputed values come from the same kernels on the same
// inputs, so the gradients are bitwise those of `none`.
//   none:      everything the backward reads (per block: 2 LayerNorm outputs and
//              statistics, qkv, attention output and log-sum-exp, residuals, MLP pre- and
//              post-GELU).
//   selective: qkv, the attention output and log-sum-exp, the MLP's pre-GELU activation
//              and the block output; the LayerNorm outputs and statistics, the GELU output
//              and the post-attention residual (one [N,C] product from the kept attention
//              output, plus its TP allreduce) are recomputed just before the block's
//              backward. The flash-style attention never holds [T,T] probabilities, so its
//              core costs O(T^2) to recompute but only [N,C] to keep: it is kept, and the
//              cut (>= 40% of activations) comes from the pointwise outputs instead.
//   full:      only each block's output (= the next block's input); the whole block
//              forward is recomputed from its input before its backward (with tensor
//              parallelism, including its two TP allreduces).
// Dropped buffers live once per model (shared by every block, chunk and slot).
enum class Recompute { none, selective, full };
const char* to_string(Recompute r);
// "none" | "selective" | "full"; throws std::invalid_argument otherwise.
Recompute parse_recompute(const std::string& name);

struct GptOptions {
  GptShardSpec shard;                // empty chunks: the whole model
  comm::Communicator* tp = nullptr;  // the TP group (required when shard.tp_size > 1)
  int slots = 1;                     // micro-batches in flight per chunk
  Recompute recompute = Recompute::none;
  // ZeRO-3: allocate no flat parameter/gradient buffers; the owner binds each block's
  // storage (ParameterSet::bind) from the block hooks (parallel/zero3_params.h).
  bool unbound_params = false;
};

// Floats a Gpt allocates through its backend, by purpose, computed without building one
// (`trainctl plan`'s memory estimate; a unit test holds it equal to what Gpt allocates).
struct GptMemoryFloats {
  int64_t params = 0;       // the flat weight buffer (the gradient buffer is as large)
  int64_t activations = 0;  // what the `slots` micro-batches in flight keep, every chunk
  int64_t recompute = 0;    // the shared block buffers recomputation writes into
  int64_t workspace = 0;    // backward and head scratch shared by chunks and slots
};
GptMemoryFloats gpt_memory_floats(const ModelConfig& config, const GptOptions& options, int batch,
                                  int seq_len);

class Gpt {
 public:
  // Activation buffers are sized for micro-batches of `batch` sequences of `seq_len`.
  Gpt(const ModelConfig& config, ops::Backend& backend, int batch, int seq_len,
      GptOptions options = {});
  ~Gpt();
  Gpt(const Gpt&) = delete;
  Gpt& operator=(const Gpt&) = delete;

  const ModelConfig& config() const { return config_; }
  const GptShardSpec& shard() const { return shard_; }
  ops::Backend& backend() const { return backend_; }
  ParameterSet& params() { return params_; }
  const ParameterSet& params() const { return params_; }

  // GPT-2 initialisation (N(0, 0.02), residual projections scaled by 1/sqrt(2 n_layer)),
  // a pure function of the seed; a shard gets its slice of the unsharded model's values.
  void init_weights(uint64_t seed);

  // --- the whole model on this rank (every chunk; embedding and head held) -------------
  // One micro-batch, forward and backward. tokens/targets are [batch, seq_len]; targets < 0
  // are ignored. Parameter gradients ACCUMULATE, scaled so that each token's loss
  // contributes `grad_scale` (pass 1 / tokens-per-optimizer-step for a mean over the step).
  // Returns the sum of the token losses and sets *count to the number of counted tokens.
  double forward_backward(const int32_t* tokens, const int32_t* targets, float grad_scale,
                          int64_t* count);
  // Forward only (evaluation). Same return convention.
  double forward_loss(const int32_t* tokens, const int32_t* targets, int64_t* count);

  // --- one chunk at a time (pipeline stages) ---------------------------------------------
  int num_chunks() const { return static_cast<int>(shard_.chunks.size()); }
  bool has_embedding(int chunk) const { return shard_.embedding && chunk == 0; }
  bool has_head(int chunk) const { return shard_.head && chunk == num_chunks() - 1; }
  // Floats in one stage-boundary activation or gradient: batch * seq_len * d_model.
  int64_t boundary_floats() const;
  // Where the previous stage's output for (chunk, slot) must be written before
  // forward_chunk (chunks without the embedding).
  float* input_buffer(int chunk, int slot);
  struct ChunkLoss {
    double sum = 0.0;
    int64_t count = 0;
  };
  // Forward of `chunk` on the micro-batch in `slot`. tokens: needed by the embedding chunk
  // (and kept by the caller until that chunk's backward); targets: by the head chunk,
  // which also computes the loss (added to *loss) and, if `backward`, the gradient of the
  // loss sum scaled by grad_scale (kept in the slot for backward_chunk; the tied
  // embedding's share accumulates now). Returns the output activation (in the slot, valid
  // until its backward), or nullptr for the head chunk.
  const float* forward_chunk(int chunk, int slot, const int32_t* tokens, const int32_t* targets,
                             bool backward, float grad_scale, ChunkLoss* loss);
  // Where the next stage's gradient of this chunk's output must be written before
  // backward_chunk (chunks without the head). Shared by all chunks and slots.
  float* output_grad_buffer() { return dres_; }
  // Backward of `chunk` for the micro-batch in `slot`; parameter gradients accumulate.
  // `report` = this backward makes the chunk's gradients final for the step: the
  // grad-ready hook fires for each piece as it completes. Returns the gradient of the
  // chunk's input (valid until the next backward_chunk), or nullptr for the embedding chunk.
  const float* backward_chunk(int chunk, int slot, const int32_t* tokens, bool report);

  // The flat gradient buffer as contiguous pieces, [begin, end) float offsets, descending
  // through the buffer in the order the backward pass makes them final: the LM head's copy
  // of the tied embedding (if any), then for each block from the last to the first four
  // pieces: its MLP matrices (c_fc, mlp.c_proj; the last block's also holds ln_f), ln_2,
  // its attention matrices (c_attn, attn.c_proj), ln_1 (llama: gate/up/down_proj, with
  // model.norm and an untied lm_head in the last block's; post_attention_layernorm;
  // q/k/v/o_proj; input_layernorm); then the embeddings (wpe and wte as
  // two pieces when wte's gradient is exchanged with the last stage, else one). A block's
  // matrices are final before the input gradient of its c_fc / c_attn is computed, so data
  // parallelism reduces them behind that product: the step's exposed tail is only ln_1 of
  // the first block and the embeddings.
  std::vector<std::pair<int64_t, int64_t>> grad_pieces() const;
  // The piece holding the tied embedding on a stage that must exchange its gradient with
  // the other end of the pipeline (pp > 1), or -1. backward_chunk never reports it: the
  // caller does, after the exchange.
  int tied_embedding_piece() const;
  // This rank holds one end of a tied embedding split over pipeline stages (pp > 1, first
  // or last stage): its gradient must be added to the other end's.
  bool exchanges_tied_embedding() const {
    return config_.tied() && shard_.embedding != shard_.head;
  }
  // Index of the tied embedding parameter on this rank (wte or its copy), or -1 (also when
  // the LM head is untied).
  int tied_embedding_param() const;
  // Index of the LM head's weight on this rank (lm_head, or the tied embedding), or -1.
  int head_weight() const;

  // Called during backward with the index (into grad_pieces()) of each piece whose
  // gradients have just become final.
  void set_grad_ready_hook(std::function<void(int piece)> hook) { grad_ready_ = std::move(hook); }
  // Fires the hook for `piece` (the tied embedding after its exchange).
  void report_grad_ready(int piece) const {
    if (grad_ready_) grad_ready_(piece);
  }

  // Parameter residency (ZeRO-3): called with a rank-local block index (0 ..
  // num_blocks() - 1, chunk by chunk in pipeline order) just before the block's forward,
  // before its recomputation and backward, and after its backward. The block's parameters
  // (and for backward its gradients) must be bound when the first two return.
  // The resident hooks frame each use of the embedding and head parameters likewise:
  // embedding_forward (wte, wpe), head_forward (ln_f and the tied embedding; with
  // `grads`, the tied embedding's gradient too), head_backward (ln_f and its gradients)
  // and embedding_backward (wte's and wpe's gradients only). What `before` binds must
  // stay bound until `after`.
  enum class ResidentUse { embedding_forward, head_forward, head_backward, embedding_backward };
  struct BlockHooks {
    std::function<void(int block)> before_forward, before_backward, after_backward;
    std::function<void(ResidentUse use, bool grads)> before_resident, after_resident;
  };
  void set_block_hooks(BlockHooks hooks) { block_hooks_ = std::move(hooks); }
  void resident_hook(bool before, ResidentUse use, bool grads) const {
    const auto& hook = before ? block_hooks_.before_resident : block_hooks_.after_resident;
    if (hook) hook(use, grads);
  }
  int num_blocks() const;
  // The chunk a rank-local block belongs to.
  int chunk_of_block(int block) const;
  // [begin, end) of the flat parameter layout holding block `block`'s parameters.
  std::pair<int64_t, int64_t> block_param_range(int block) const;

  // Each block's forward and backward (and the LM head's) become timeline events while
  // `trace` records (null: none).
  void set_trace(observe::TraceRecorder* trace) { trace_ = trace; }

 private:
  struct BlockParams;
  struct BlockActs;
  struct ChunkActs;

  void declare_params(bool unbound);
  void allocate_activations(int slots);
  // `output`: also write the block output a.res2 (not when recomputing for backward).
  void block_forward(const BlockParams& p, BlockActs& a, const float* x, bool output = true);
  void llama_block_forward(const BlockParams& p, BlockActs& a, const float* x, bool output);
  void llama_block_backward(const BlockParams& p, const BlockActs& a, const float* x, float* dres,
                            int first_piece, bool report);
  // Products with parameters declared side by side whose outputs share one activation row of
  // `out_width` floats (llama's q | k | v and gate | up): forward (=), weight gradients (+=),
  // input gradient (=).
  void fused_forward(float* out, int out_width, const float* inp, std::initializer_list<int> ws,
                     int IC);
  void fused_weight_grads(const float* dout, int out_width, const float* inp,
                          std::initializer_list<int> ws, int IC);
  void fused_input_grad(float* dinp, const float* dout, int out_width,
                        std::initializer_list<int> ws, int IC);
  ops::AttentionShape attention_shape() const;
  // Refills what recompute_ dropped from `a` (see Recompute) before the block's backward.
  void recompute_block(const BlockParams& p, BlockActs& a, const float* x);
  // Reports pieces first_piece .. first_piece + kPiecesPerBlock - 1 as they become final.
  void block_backward(const BlockParams& p, const BlockActs& a, const float* x, float* dres,
                      int first_piece, bool report);
  static constexpr int kPiecesPerBlock = 4;
  void head_forward(ChunkActs& a, const float* top, const int32_t* targets, bool backward,
                    float grad_scale, ChunkLoss* loss);
  void tp_allreduce(float* data, size_t count, comm::ReduceOp op = comm::ReduceOp::sum);
  ChunkActs& acts(int chunk, int slot);
  float* act(size_t n);

  ModelConfig config_;
  GptShardSpec shard_;
  comm::Communicator* tp_;
  ops::Backend& backend_;
  int B_, T_;
  Recompute recompute_;
  // Local widths under tensor parallelism: d_model / tp (attention), the MLP's hidden
  // width / tp (4 d_model or ffn_hidden), heads / tp, vocab / tp.
  int C_attn_, C_mlp_, NH_local_, V_local_;
  int NKV_local_, qkv_width_, fc_width_;  // k/v heads, q|k|v and fc row widths on this rank
  ops::VocabRange vocab_;
  ParameterSet params_;
  int wte_ = -1, wpe_ = -1, lnf_w_ = -1, lnf_b_ = -1, wte_copy_ = -1, lm_head_ = -1;
  std::vector<BlockParams> blocks_;           // this rank's blocks, chunk by chunk
  std::vector<int> chunk_first_block_;        // index into blocks_ of each chunk's first
  std::vector<std::vector<ChunkActs>> acts_;  // [chunk][slot]
  std::vector<void*> buffers_;                // every activation/scratch allocation, freed in ~Gpt
  // Backward and head scratch, shared by chunks and slots.
  float *dres_ = nullptr, *dC_ = nullptr, *dC2_ = nullptr, *dqkv_ = nullptr;
  float *d4C_a_ = nullptr, *d4C_b_ = nullptr, *scratchC_ = nullptr;
  float *logits_ = nullptr, *row_max_ = nullptr, *xent_stats_ = nullptr;
  std::function<void(int)> grad_ready_;
  BlockHooks block_hooks_;
  observe::TraceRecorder* trace_ = nullptr;
};

}  // namespace trainctl::model
