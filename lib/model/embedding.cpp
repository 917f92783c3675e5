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
  const int C = ctx_.config.d_model;
  if (!ctx_.cp.active()) {
    ctx_.be().embedding_forward(out, tokens, w.data(wte_), vocab_, wpe, ctx_.B, ctx_.T, C);
    return;
  }
  // Context parallelism: each local chunk reads the position rows of its true positions.
  for_each_chunk([&](int64_t row, int pos0, int len) {
    ctx_.be().embedding_forward(out + row * C, tokens + row, w.data(wte_), vocab_,
                                wpe != nullptr ? wpe + int64_t{pos0} * C : nullptr, 1, len, C);
  });
}

void Embedding::backward(const float* dout, const int32_t* tokens) const {
  auto& w = ctx_.w();
  float* dwpe = wpe_ >= 0 ? w.grad(wpe_) : nullptr;
  const int C = ctx_.config.d_model;
  if (!ctx_.cp.active()) {
    ctx_.be().embedding_backward(w.grad(wte_), dwpe, dout, tokens, vocab_, ctx_.B, ctx_.T, C);
    return;
  }
  for_each_chunk([&](int64_t row, int pos0, int len) {
    ctx_.be().embedding_backward(w.grad(wte_), dwpe != nullptr ? dwpe + int64_t{pos0} * C : nullptr,
                                 dout + row * C, tokens + row, vocab_, 1, len, C);
  });
}

void Embedding::for_each_chunk(const std::function<void(int64_t, int, int)>& f) const {
  for (int b = 0; b < ctx_.B; ++b) {
    for (int l = 0; l < 2; ++l) {
      f(int64_t{b} * ctx_.T + l * ctx_.cp.chunk, ctx_.cp.first_position(l, ctx_.cp.rank),
        ctx_.cp.chunk);
    }
  }
}

}  // namespace trainctl::model
