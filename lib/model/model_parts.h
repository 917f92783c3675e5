#pragma once
// The model composed from its parts (model/block.h): the embedding on the first pipeline
// stage, this rank's blocks chunk by chunk (model/block_factory.h), the LM head on the last
// stage, and the buffers between them. Declaring the parts in this order gives the flat
// parameter layout (gpt_param_specs); allocating them gives every activation buffer
// (gpt_memory_floats counts the same calls without a backend).
#include <memory>
#include <vector>

#include "model/activation_arena.h"
#include "model/block.h"
#include "model/embedding.h"
#include "model/lm_head.h"
#include "model/param_list.h"

namespace trainctl::model {

struct ModelParts {
  std::unique_ptr<Embedding> embedding;        // first stage only
  std::vector<std::unique_ptr<Block>> blocks;  // this rank's, chunk by chunk
  std::vector<int> chunk_first_block;          // index into blocks of each chunk's first
  std::unique_ptr<LmHead> head;                // last stage only
  // Buffers between the parts: d(block output) flowing down through the blocks (shared by
  // chunks and slots), and each chunk's input per slot (the embedding's output, or the
  // previous stage's), of the kept type: with 16-bit kept activations a store, which the
  // chunk's first block reads through the fp32 `input_working` (ActivationArena).
  float* dres = nullptr;
  std::vector<std::vector<void*>> inputs;  // [chunk][slot]
  float* input_working = nullptr;          // 16-bit kept activations only
  // Sequence parallelism's scratch (ModelContext::sp_rows, [rows(),C]) and [N,C] buffer
  // (the embedding's output before its reduce-scatter, d(input) gathered for its backward;
  // the blocks' gathered d(branch output); the head's d(norm output)).
  float* sp_rows = nullptr;
  float* sp_full = nullptr;

  // `slots[c]`: the micro-batches chunk c keeps in flight.
  void allocate(const ModelContext& ctx, ActivationArena& arena, const std::vector<int>& slots);
};

// Declares every part of ctx.shard in `params`, in flat-buffer order.
ModelParts compose_model(const ModelContext& ctx, ParamList& params);

}  // namespace trainctl::model
