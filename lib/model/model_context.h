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
  comm::Communicator* ep = nullptr;  // the expert-parallel group (when shard.ep_size > 1)
  // The gradient scale of the micro-batch being run forward (Gpt::forward_chunk sets it; 0
  // for a forward without backward): what each token's loss contributes to the gradients.
  // Losses computed inside blocks (the MoE auxiliary loss) scale their gradients by it.
  float grad_scale = 0.0f;
  // Set during a zero-bubble schedule's B pass (Gpt::backward_chunk): the linear layers'
  // weight-gradient products go there instead of running (model/fused_linear.h).
  DeferredWeightGrads* defer = nullptr;

  int N() const { return B * T; }
  size_t NC() const { return static_cast<size_t>(N()) * config.d_model; }
  int tp_size() const { return shard.tp_size; }
  // Row-parallel outputs are partial sums: one TP rank adds the bias, the allreduce the rest.
  bool bias_here() const { return shard.tp_rank == 0; }
  ops::Backend& be() const { return *backend; }
  ParameterSet& w() const { return *params; }
  // Sums (or maxes) `data` over the TP group; nothing at tp 1.
  void tp_allreduce(float* data, size_t count, comm::ReduceOp op = comm::ReduceOp::sum) const {
    if (shard.tp_size > 1) tp->allreduce(data, count, op);
  }
};

}  // namespace trainctl::model
