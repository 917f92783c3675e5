#pragma once
// The model's input: token embedding (gpt: transformer.wte, llama: model.embed_tokens) and,
// for gpt, the learned position table (transformer.wpe; llama places tokens with RoPE inside
// attention). Vocab-parallel under tensor parallelism: each TP rank holds vocab/tp rows of
// the token table and embeds the tokens it holds (zeros elsewhere); rank 0 adds the
// positions; the caller sums the ranks' partial embeddings over the TP group.
#include <cstdint>
#include <functional>

#include "model/model_context.h"
#include "model/param_list.h"

namespace trainctl::model {

class Embedding {
 public:
  // The token table's declaration (the LM head's tied copy on the last stage is the same
  // tensor, model/lm_head.h).
  static ParamSpec token_table_spec(const ModelConfig& config, const GptShardSpec& shard);
  // This rank's rows of the vocabulary.
  static ops::VocabRange vocab_range(const ModelConfig& config, const GptShardSpec& shard);

  // Declares the token table (and gpt's position table).
  Embedding(const ModelContext& ctx, ParamList& params);
  int token_table() const { return wte_; }
  int positions() const { return wpe_; }  // -1 for llama

  // out [N,C] = this rank's share of the embedding of tokens [B,T].
  void forward(const int32_t* tokens, float* out) const;
  // The tables' gradients accumulate from dout [N,C] (the same on every TP rank).
  void backward(const float* dout, const int32_t* tokens) const;

 private:
  // Context parallelism: f(first local row, first true position, rows) per local chunk.
  void for_each_chunk(const std::function<void(int64_t, int, int)>& f) const;

  const ModelContext& ctx_;
  ops::VocabRange vocab_;
  int wte_ = -1, wpe_ = -1;
};

}  // namespace trainctl::model
