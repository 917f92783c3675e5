#pragma once
// The decoder-only transformer with explicit forward and backward (no autograd), in the
// families of model/model_config.h: nanoGPT's GPT (learned positions, pre-LayerNorm
// blocks, 4x MLP with tanh-GELU, biases everywhere, LM head tied to the token embedding;
// nanoGPT's names and layouts) and Llama (RMSNorm, RoPE, SwiGLU, grouped-query attention,
// no biases, untied head by default; Hugging Face's names and layouts).
//
// Gpt composes the model from its parts (model/model_parts.h: embedding, a list of blocks
// made from the ModelConfig by model/block_factory.h, LM head and loss; the interfaces in
// model/block.h) and runs them: pipeline chunks, micro-batch slots, gradient pieces, the
// hooks of data parallelism and ZeRO-3, the trace. What a block computes lives in the
// block; only the order of the parts lives here.
//
// One object holds one rank's shard of the model (model/shard.h):
//   - pipeline parallelism: some contiguous ranges of blocks ("chunks": one per pipeline
//     stage the rank runs; several for the interleaved schedule), plus the embedding on the
//     first stage and the final norm + LM head on the last;
//   - tensor parallelism (Megatron): attention heads and MLP columns split over the TP group
//     (column-parallel input projections, row-parallel output projections with a TP
//     allreduce of their outputs in forward and of the column-parallel layers' input
//     gradients in backward), vocab-parallel embedding and cross-entropy (the [N, V]
//     logits are never gathered). Replicated parameters (norms, row-parallel biases, wpe)
//     get identical gradients on every TP rank because their inputs are identical after
//     each allreduce.
// Activations of several micro-batches in flight live in "slots" (one per micro-batch a
// pipeline schedule keeps between its forward and its backward).
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "model/activation_arena.h"
#include "model/deferred_weight_grads.h"
#include "model/lm_head.h"
#include "model/model_config.h"
#include "model/model_context.h"
#include "model/model_parts.h"
#include "model/parameters.h"
#include "model/recompute.h"
#include "model/shard.h"
#include "observe/trace_recorder.h"
#include "ops/backend.h"

namespace trainctl::model {

namespace moe {
class MoeFfn;
}

// One mixture-of-experts layer of this rank's shard: its layer index in the whole model.
struct MoeLayer {
  int layer = 0;
  moe::MoeFfn* ffn = nullptr;
};

struct GptOptions {
  GptShardSpec shard;                // empty chunks: the whole model
  comm::Communicator* tp = nullptr;  // the TP group (required when shard.tp_size > 1)
  // Context parallelism (model/context_chunks.h): seq_len is then the local length
  // (seq_len / cp of the whole sequence) and `cp` the CP ring (required when cp.cp > 1).
  ContextChunks cp;
  comm::Communicator* cp_group = nullptr;
  comm::Communicator* ep = nullptr;  // the ep group (required when shard.ep_size > 1)
  int slots = 1;                     // micro-batches in flight per chunk
  // Per chunk where the schedule holds a different number of each (interleaved): replaces
  // `slots` when not empty (one entry per chunk, each >= 1).
  std::vector<int> chunk_slots;
  Recompute recompute = Recompute::none;
  // Sequence parallelism (Korthikanti et al. 2022; needs shard.tp_size > 1 dividing
  // seq_len): the residual stream, the norms and the stage boundaries hold batch *
  // seq_len / tp token rows per TP rank (model/model_context.h); boundary_floats() shrinks
  // by tp.
  bool sequence_parallel = false;
  // ZeRO-3: allocate no flat parameter/gradient buffers; the owner binds each block's
  // storage (ParameterSet::bind) from the block hooks (parallel/zero3_params.h).
  bool unbound_params = false;
  // Mixed precision: allocate the flat gradient buffer only; the owner keeps the weights
  // in 16 bits and binds each unit's fp32 widening from the block hooks
  // (parallel/mixed_params.h).
  bool grads_only = false;
  // Mixed precision: the type the activations kept for backward are stored in (bf16/fp16:
  // rounded as produced, 16-bit per micro-batch; model/activation_arena.h).
  DType kept_activations = DType::fp32;
};

// Floats a Gpt allocates through its backend, by purpose (model/activation_arena.h),
// computed without building one (`trainctl plan`'s memory estimate): the model's parts
// declared and allocated without a backend, so it is what Gpt allocates.
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

  const ModelConfig& config() const { return ctx_.config; }
  const GptShardSpec& shard() const { return ctx_.shard; }
  ops::Backend& backend() const { return *ctx_.backend; }
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
  int num_chunks() const { return static_cast<int>(ctx_.shard.chunks.size()); }
  bool has_embedding(int chunk) const { return ctx_.shard.embedding && chunk == 0; }
  bool has_head(int chunk) const { return ctx_.shard.head && chunk == num_chunks() - 1; }
  // Values in one stage-boundary activation or gradient: batch * seq_len * d_model (/ tp
  // under sequence parallelism).
  int64_t boundary_floats() const;
  // Bytes of one boundary activation as the model keeps and sends it: boundary_floats()
  // values of the kept type (GptOptions::kept_activations: 16-bit stores, as Megatron-LM
  // sends bf16, or fp32). Gradients cross stages in fp32 (output_grad_buffer).
  int64_t boundary_bytes() const;
  // Where the previous stage's output for (chunk, slot) must be written before
  // forward_chunk (chunks without the embedding): boundary_bytes() bytes.
  void* input_buffer(int chunk, int slot);
  // Writes a chunk's output (forward_chunk's, fp32) as a boundary activation
  // (boundary_bytes() at dst: a staging buffer, or the next chunk's input_buffer).
  void store_boundary(void* dst, const float* src);
  // Copies one boundary activation (boundary_bytes()) from src to dst: a staged output into
  // the next chunk's input_buffer where both run here (zbv's turn of the V).
  void copy_boundary(void* dst, const void* src);
  using ChunkLoss = model::ChunkLoss;
  // Forward of `chunk` on the micro-batch in `slot`. tokens: needed by the embedding chunk
  // (and kept by the caller until that chunk's backward); targets: by the head chunk,
  // which also computes the loss (added to *loss) and, if `backward`, the gradient of the
  // loss sum scaled by grad_scale (kept in the slot for backward_chunk; the tied
  // embedding's share accumulates now). Returns the output activation (boundary_floats()
  // fp32), or nullptr for the head chunk. It is not kept: the backward never reads it, and
  // the buffer is valid only until the next forward_chunk; the caller stages it
  // (store_boundary) for the next stage, as Megatron-LM frees a stage's output once sent.
  const float* forward_chunk(int chunk, int slot, const int32_t* tokens, const int32_t* targets,
                             bool backward, float grad_scale, ChunkLoss* loss);
  // Where the next stage's gradient of this chunk's output must be written before
  // backward_chunk (chunks without the head). Shared by all chunks and slots.
  float* output_grad_buffer() { return parts_.dres; }
  // Backward of `chunk` for the micro-batch in `slot`; parameter gradients accumulate.
  // `report` = this backward makes the chunk's gradients final for the step: the
  // grad-ready hook fires for each piece as it completes. Returns the gradient of the
  // chunk's input (valid until the next backward_chunk), or nullptr for the embedding chunk.
  // With `weights_later` (zero-bubble schedules' B), the linear layers' weight gradients
  // and the piece reports are recorded there instead (model/deferred_weight_grads.h): the
  // caller runs it (W) after this backward and before the chunk's next one; the slot is
  // free again as soon as this returns.
  const float* backward_chunk(int chunk, int slot, const int32_t* tokens, bool report,
                              DeferredWeightGrads* weights_later = nullptr);

  // The flat gradient buffer as contiguous pieces, [begin, end) float offsets, descending
  // through the buffer in the order the backward pass makes them final: the LM head's copy
  // of the tied embedding (if any), then for each block from the last to the first its
  // pieces (Block::piece_starts; today's blocks have four: the feed-forward's matrices
  // (the last block's also holds the final norm and an untied lm_head), the second norm,
  // the attention's matrices, the first norm); then the embeddings (wpe and wte as two
  // pieces when wte's gradient is exchanged with the last stage, else one). A block's
  // matrices are final before the input gradient of its input projections is computed, so
  // data parallelism reduces them behind that product: the step's exposed tail is only the
  // first block's first norm and the embeddings.
  std::vector<std::pair<int64_t, int64_t>> grad_pieces() const;
  // The piece holding the tied embedding on a stage that must exchange its gradient with
  // the other end of the pipeline (pp > 1), or -1. backward_chunk never reports it: the
  // caller does, after the exchange.
  int tied_embedding_piece() const;
  // This rank holds one end of a tied embedding split over pipeline stages (pp > 1, first
  // or last stage): its gradient must be added to the other end's.
  bool exchanges_tied_embedding() const {
    return ctx_.config.tied() && ctx_.shard.embedding != ctx_.shard.head;
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

  // This rank's mixture-of-experts layers, in layer order (empty for a dense model).
  std::vector<MoeLayer> moe_layers();

  // Each block's forward and backward (and the LM head's) become timeline events while
  // `trace` records (null: none).
  void set_trace(observe::TraceRecorder* trace) { trace_ = trace; }
  // The CP ring's exchanges (its times: ring traffic and the part not hidden), or null
  // without context parallelism.
  comm::RingExchange* cp_ring() const { return cp_ring_.get(); }

 private:
  void check_slot(int chunk, int slot) const;
  int embedding_param() const;  // the token table on this rank, or -1
  int tied_copy_param() const;  // the head's copy of it, or -1

  ModelContext ctx_;  // every part keeps a reference: declared first, destroyed last
  ParameterSet params_;
  ActivationArena arena_;
  ModelParts parts_;
  std::vector<int> block_first_piece_;  // index into grad_pieces() of each block's first
  int embedding_piece_ = 0;             // ... and of the embeddings'
  std::function<void(int)> grad_ready_;
  BlockHooks block_hooks_;
  observe::TraceRecorder* trace_ = nullptr;
  std::unique_ptr<comm::RingExchange> cp_ring_;  // the CP ring's thread (cp > 1)
};

}  // namespace trainctl::model
