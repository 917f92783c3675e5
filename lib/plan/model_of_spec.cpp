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
  return c;
}

}  // namespace trainctl::plan
