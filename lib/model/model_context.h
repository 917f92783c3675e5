#pragma once
// What every part of one model instance shares (model/block.h): the dimensions, this rank's
// shard, the recomputation mode, and, once the model runs, the backend, the parameters and
// the TP group. Parts are also built without a backend, to list the parameters
// (gpt_param_specs) and to count the activation memory (gpt_memory_floats): the same code
// that declares and allocates for a running model then does the bookkeeping, so the two
// cannot drift apart.
#include <cstddef>

#include "comm/communicator.h"
#include "comm/ring_exchange.h"
#include "model/context_chunks.h"
#include "model/model_config.h"
#include "model/parameters.h"
#include "model/recompute.h"
#include "model/shard.h"
#include "ops/backend.h"

namespace trainctl::model {

class DeferredWeightGrads;  // model/deferred_weight_grads.h

// ModelContext::deferred_inputs_in_slot from its parts (the memory plan asks it of a spec).
inline bool deferred_inputs_in_slot(Recompute recompute, bool sequence_parallel_active,
                                    bool cp_active, DType kept) {
  return recompute == Recompute::none && !sequence_parallel_active && !cp_active &&
         kept == DType::fp32;
}

struct ModelContext {
  ModelConfig config;
  GptShardSpec shard;
  int B = 1;  // sequences per micro-batch
  int T = 1;  // tokens per sequence
  Recompute recompute = Recompute::none;
  ops::Backend* backend = nullptr;   // null: declaration and accounting only
  ParameterSet* params = nullptr;    // null likewise
  comm::Communicator* tp = nullptr;  // the TP group (when shard.tp_size > 1)
  // Context parallelism: T is this rank's two chunks of each sequence; attention runs
  // around the CP ring (model/ring_attention.h), positions are the tokens' true ones.
  ContextChunks cp;
  comm::RingExchange* cp_ring = nullptr;  // null while counting memory or at cp 1
  comm::Communicator* ep = nullptr;       // the expert-parallel group (when shard.ep_size > 1)
  // The gradient scale of the micro-batch being run forward (Gpt::forward_chunk sets it; 0
  // for a forward without backward): what each token's loss contributes to the gradients.
  // Losses computed inside blocks (the MoE auxiliary loss) scale their gradients by it.
  float grad_scale = 0.0f;
  // Set during a zero-bubble schedule's B pass (Gpt::backward_chunk): the linear layers'
  // weight-gradient products go there instead of running (model/fused_linear.h).
  DeferredWeightGrads* defer = nullptr;
  // Sequence parallelism (parallel.sequence_parallel, model/sequence_parallel.h): the
  // residual stream, the norms and the stage boundaries hold rows() = N / tp token rows per
  // TP rank (rank r: rows [r N/tp, (r+1) N/tp) of the micro-batch's [B, T] rows); the
  // TP-split matmuls see all N rows, all-gathered before them and reduce-scattered after.
  bool sequence_parallel = false;
  float* sp_rows = nullptr;  // [rows(), C] scratch of the reduce-scatter (running model only)
  // The type kept activations are stored in (GptOptions::kept_activations). Not fp32: every
  // producer of a value the backward reads rounds it to this type as it writes it
  // (round_kept), whether the mode keeps or recomputes it, so that a 16-bit store holds it
  // exactly and recomputation gives the same bits.
  DType kept = DType::fp32;

  int N() const { return B * T; }
  size_t NC() const { return static_cast<size_t>(N()) * config.d_model; }
  int tp_size() const { return shard.tp_size; }
  bool sp() const { return sequence_parallel && shard.tp_size > 1; }
  // Whether every deferred linear product's input is an activation the forward stored in
  // the micro-batch's slot, which the pipeline executor holds until W: then W reads it
  // there and B copies only the output gradient. Not under recomputation (inputs rebuilt in
  // shared buffers), sequence parallelism (all-gathered inputs), context parallelism, or
  // 16-bit kept activations (the slot holds them packed; the fp32 buffer is shared).
  bool deferred_inputs_in_slot() const {
    return model::deferred_inputs_in_slot(recompute, sp(), cp.active(), kept);
  }
  // Token rows of the residual stream on this rank: N, or N / tp under sequence parallelism.
  int rows() const { return sp() ? N() / shard.tp_size : N(); }
  size_t rows_C() const { return static_cast<size_t>(rows()) * config.d_model; }
  // Row-parallel outputs are partial sums: one TP rank adds the bias, the allreduce the rest.
  bool bias_here() const { return shard.tp_rank == 0; }
  ops::Backend& be() const { return *backend; }
  void round_kept(float* p, size_t n) const {
    if (kept != DType::fp32) backend->round_to_type(p, n, kept);
  }
  ParameterSet& w() const { return *params; }
  // Sums (or maxes) `data` over the TP group; nothing at tp 1.
  void tp_allreduce(float* data, size_t count, comm::ReduceOp op = comm::ReduceOp::sum) const {
    if (shard.tp_size > 1) tp->allreduce(data, count, op);
  }
  // The output of a row-parallel product, y [N,C] partial sums: summed over the TP group
  // into all of y (allreduce), or, under sequence parallelism, reduce-scattered so that y's
  // first rows() rows hold this rank's rows of the sum.
  void tp_sum_rows(float* y) const;
  // Sequence parallelism's two halves: local [rows(),C] = this rank's rows of the sum over
  // the TP group of full [N,C]; full [N,C] = every rank's local rows, in rank order.
  void sp_scatter_sum(const float* full, float* local) const;
  void sp_gather(const float* local, float* full) const;
};

}  // namespace trainctl::model
