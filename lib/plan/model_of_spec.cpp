#include "plan/model_of_spec.h"

namespace trainctl::plan {

model::ModelConfig model_config_of(const config::ModelSpec& m) {
  model::ModelConfig c;
  c.vocab_size = m.vocab_size;
  c.max_seq_len = m.seq_len;
  c.n_layer = m.n_layer;
  c.n_head = m.n_head;
  c.d_model = m.d_model;
  if (m.is_llama()) {
    c.family = model::Family::llama;
    c.n_kv_head = m.kv_heads();
    c.ffn_hidden = m.mlp_hidden();
    c.norm_eps = static_cast<float>(m.norm_eps);
    c.rope_theta = static_cast<float>(m.rope_theta);
    c.tie_embeddings = m.tie_embeddings;
  }
  if (m.moe.enabled()) {
    const config::MoeSpec& e = m.moe;
    c.moe.num_experts = e.num_experts;
    c.moe.top_k = e.top_k;
    c.moe.expert_ffn_hidden = m.expert_hidden();
    c.moe.shared_experts = e.shared_experts;
    c.moe.score = e.score == "sigmoid" ? model::MoeScore::sigmoid : model::MoeScore::softmax;
    c.moe.aux_loss_coef = e.balance == "aux_loss" ? static_cast<float>(e.aux_loss_coef) : 0.0f;
    c.moe.bias_update_rate = e.balance == "bias" ? static_cast<float>(e.bias_update_rate) : 0.0f;
    c.moe.capacity_factor = static_cast<float>(e.capacity_factor);
    c.moe.layers_every = e.layers_every;
    c.moe.layers_from = e.layers_from;
  }
  return c;
}

model::StageSplit stage_split_of(const config::ParallelSpec& p) {
  return {.equal = p.stage_balance == "equal", .layers = p.layers_per_stage};
}

}  // namespace trainctl::plan
