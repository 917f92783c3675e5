#include "model/model_parts.h"

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

void ModelParts::allocate(const ModelContext& ctx, ActivationArena& arena, int slots) {
  // Between blocks (and stages) the residual stream: rows() rows per rank.
  const auto NC = static_cast<int64_t>(ctx.rows_C());
  dres = arena.shared("model.dres", NC, MemoryUse::workspace);
  if (ctx.sp()) {
    sp_rows = arena.shared("sp.rows", NC, MemoryUse::workspace);
    sp_full = arena.shared("sp.full", static_cast<int64_t>(ctx.NC()), MemoryUse::workspace);
  }
  // Each block is one unit of kept activations (ActivationArena::begin_unit): unit b is
  // blocks[b], which Gpt packs after its forward and unpacks before its backward.
  for (const auto& block : blocks) {
    arena.begin_unit();
    block->allocate(arena, slots);
  }
  if (head) head->allocate(arena, slots);
  inputs.assign(ctx.shard.chunks.size(), {});
  for (auto& chunk : inputs) {
    for (int s = 0; s < slots; ++s) chunk.push_back(arena.take(NC, MemoryUse::activations));
  }
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
