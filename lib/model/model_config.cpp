#include "model/model_config.h"

namespace trainctl::model {

const char* to_string(Family f) { return f == Family::llama ? "llama" : "gpt"; }

namespace {

// One feed-forward of width H: llama gate, up, down; gpt c_fc and c_proj with biases.
int64_t ffn_params(const ModelConfig& c, int64_t H) {
  const int64_t C = c.d_model;
  return c.llama() ? 3 * H * C : 2 * H * C + H + C;
}

}  // namespace

int ModelConfig::moe_layers() const {
  int n = 0;
  for (int l = 0; l < n_layer; ++l) n += moe.layer(l) ? 1 : 0;
  return n;
}

int64_t ModelConfig::active_params() const {
  const int64_t He = moe.expert_ffn_hidden;
  const int64_t unused = int64_t{moe.num_experts - moe.top_k} * ffn_params(*this, He);
  return num_params() - moe_layers() * unused;
}

int64_t ModelConfig::num_params() const {
  const int64_t C = d_model, H = mlp_hidden(), V = vocab_size;
  // An MoE layer's feed-forward: the router, the routed and the shared experts.
  const int64_t moe_delta = moe_layers() * (int64_t{moe.num_experts} * C +
                                            int64_t{moe.num_experts + moe.shared_experts} *
                                                ffn_params(*this, moe.expert_ffn_hidden) -
                                            ffn_params(*this, H));
  if (llama()) {
    const int64_t per_layer = 2 * C                                         // two RMSNorms
                              + int64_t{qkv_rows()} * C                     // q, k, v
                              + C * C                                       // o_proj
                              + 3 * H * C;                                  // gate, up, down
    return V * C * (tied() ? 1 : 2) + n_layer * per_layer + C + moe_delta;  // + final norm
  }
  const int64_t per_layer = 2 * C                // ln_1
                            + 3 * C * C + 3 * C  // c_attn
                            + C * C + C          // attn.c_proj
                            + 2 * C              // ln_2
                            + 4 * C * C + 4 * C  // c_fc
                            + 4 * C * C + C;     // mlp.c_proj
  return V * C + static_cast<int64_t>(max_seq_len) * C + n_layer * per_layer + 2 * C + moe_delta;
}

double ModelConfig::flops_per_token(int seq_len) const {
  return 6.0 * static_cast<double>(active_params()) +
         12.0 * n_layer * static_cast<double>(d_model) * seq_len;
}

}  // namespace trainctl::model
