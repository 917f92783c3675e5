#include "model/block_factory.h"

#include <string>

#include "model/attention_gqa.h"
#include "model/attention_mha.h"
#include "model/mlp_gelu.h"
#include "model/mlp_swiglu.h"
#include "model/moe/moe_ffn.h"
#include "model/transformer_block.h"

namespace trainctl::model {

namespace {

template <typename T>
TransformerBlock::MakeBranch branch(const ModelContext& ctx, std::string prefix) {
  return [&ctx, prefix = std::move(prefix)](ParamList& params) -> std::unique_ptr<Branch> {
    return std::make_unique<T>(ctx, params, prefix);
  };
}

}  // namespace

std::unique_ptr<Block> make_block(const ModelContext& ctx, ParamList& params, int layer) {
  // The feed-forward slot: a mixture of experts for the layers the config gives one
  // (model/moe/moe_ffn.h); every other layer keeps the dense one.
  const bool moe = ctx.config.moe.layer(layer);
  if (ctx.config.llama()) {
    // Hugging Face LlamaForCausalLM's names; MoE layers Mixtral's.
    const std::string p = "model.layers." + std::to_string(layer) + ".";
    return std::make_unique<TransformerBlock>(
        ctx, params, p, "input_layernorm", branch<GqaAttention>(ctx, p + "self_attn"),
        "post_attention_layernorm",
        moe ? branch<moe::MoeFfn>(ctx, p + "block_sparse_moe") : branch<SwiGluMlp>(ctx, p + "mlp"));
  }
  // nanoGPT's names.
  const std::string p = "transformer.h." + std::to_string(layer) + ".";
  return std::make_unique<TransformerBlock>(
      ctx, params, p, "ln_1", branch<MhaAttention>(ctx, p + "attn"), "ln_2",
      moe ? branch<moe::MoeFfn>(ctx, p + "moe") : branch<GeluMlp>(ctx, p + "mlp"));
}

}  // namespace trainctl::model
