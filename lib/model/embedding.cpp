#include "model/embedding.h"

namespace trainctl::model {

ParamSpec Embedding::token_table_spec(const ModelConfig& c, const GptShardSpec& shard) {
  const int64_t V = c.vocab_size, C = c.d_model;
  return tp_split_spec(c.llama() ? "model.embed_tokens.weight" : "transformer.wte.weight", {V, C},
                       Init::normal, kInitStd, true, shard, 0);
}

ops::VocabRange Embedding::vocab_range(const ModelConfig& c, const GptShardSpec& shard) {
  const int local = c.vocab_size / shard.tp_size;
  return {shard.tp_rank * local, local};
}

Embedding::Embedding(const ModelContext& ctx, ParamList& params)
    : ctx_(ctx), vocab_(vocab_range(ctx.config, ctx.shard)) {
  wte_ = params.add(token_table_spec(ctx.config, ctx.shard));
  if (!ctx.config.llama()) {
    wpe_ = params.replicated("transformer.wpe.weight", {ctx.config.max_seq_len, ctx.config.d_model},
                             Init::normal, kInitStd, true);
  }
}

void Embedding::forward(const int32_t* tokens, float* out) const {
  auto& w = ctx_.w();
  const float* wpe = ctx_.shard.tp_rank == 0 && wpe_ >= 0 ? w.data(wpe_) : nullptr;
  ctx_.be().embedding_forward(out, tokens, w.data(wte_), vocab_, wpe, ctx_.B, ctx_.T,
                              ctx_.config.d_model);
}

void Embedding::backward(const float* dout, const int32_t* tokens) const {
  auto& w = ctx_.w();
  ctx_.be().embedding_backward(w.grad(wte_), wpe_ >= 0 ? w.grad(wpe_) : nullptr, dout, tokens,
                               vocab_, ctx_.B, ctx_.T, ctx_.config.d_model);
}

}  // namespace trainctl::model
