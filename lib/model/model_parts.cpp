#include "model/model_parts.h"

#include <stdexcept>

#include "model/block_factory.h"

namespace trainctl::model {

ModelParts compose_model(const ModelContext& ctx, ParamList& params) {
  ModelParts parts;
  if (ctx.shard.embedding) parts.embedding = std::make_unique<Embedding>(ctx, params);
  for (const LayerRange& chunk : ctx.shard.chunks) {
    parts.chunk_first_block.push_back(static_cast<int>(parts.blocks.size()));
    for (int l = chunk.begin; l < chunk.end; ++l)
      parts.blocks.push_back(make_block(ctx, params, l));
  }
  if (ctx.shard.head) {
    const int table = parts.embedding ? parts.embedding->token_table() : -1;
    parts.head = std::make_unique<LmHead>(ctx, params, table);
  }
  return parts;
}

void ModelParts::allocate(const ModelContext& ctx, ActivationArena& arena,
                          const std::vector<int>& slots) {
  if (slots.size() != chunk_first_block.size()) {
    throw std::invalid_argument("ModelParts: one slot count per chunk");
  }
  // Between blocks (and stages) the residual stream: rows() rows per rank.
  const auto NC = static_cast<int64_t>(ctx.rows_C());
  dres = arena.shared("model.dres", NC, MemoryUse::workspace);
  if (ctx.sp()) {
    sp_rows = arena.shared("sp.rows", NC, MemoryUse::workspace);
    sp_full = arena.shared("sp.full", static_cast<int64_t>(ctx.NC()), MemoryUse::workspace);
  }
  // Each block is one unit of kept activations (ActivationArena::begin_unit): unit b is
  // blocks[b], which Gpt packs after its forward and unpacks before its backward. The last
  // block of a chunk without the head keeps no output: it leaves the chunk, staged by the
  // pipeline executor (Gpt::forward_chunk).
  for (size_t c = 0; c < chunk_first_block.size(); ++c) {
    const auto first = static_cast<size_t>(chunk_first_block[c]);
    const size_t end = c + 1 < chunk_first_block.size()
                           ? static_cast<size_t>(chunk_first_block[c + 1])
                           : blocks.size();
    const bool head_here = head != nullptr && c + 1 == chunk_first_block.size();
    for (size_t b = first; b < end; ++b) {
      arena.begin_unit(b + 1 == end && !head_here);
      blocks[b]->allocate(arena, slots[c]);
    }
  }
  if (head) head->allocate(arena, slots.back());
  inputs.assign(chunk_first_block.size(), {});
  for (size_t c = 0; c < inputs.size(); ++c) {
    for (int s = 0; s < slots[c]; ++s) {
      inputs[c].push_back(arena.take_kept(NC, MemoryUse::activations));
    }
  }
  if (arena.packs()) input_working = arena.shared("kept.input", NC, MemoryUse::workspace);
}

std::vector<ParamSpec> gpt_param_specs(const ModelConfig& config, const GptShardSpec& shard) {
  ModelContext ctx;
  ctx.config = config;
  ctx.shard = shard;
  ParamList params(shard);
  compose_model(ctx, params);
  return params.specs();
}

}  // namespace trainctl::model
