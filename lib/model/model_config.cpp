#include "model/model_config.h"

namespace trainctl::model {

const char* to_string(Family f) { return f == Family::llama ? "llama" : "gpt"; }

int64_t ModelConfig::num_params() const {
  const int64_t C = d_model, H = mlp_hidden(), V = vocab_size;
  if (llama()) {
    const int64_t per_layer = 2 * C                             // two RMSNorms
                              + int64_t{qkv_rows()} * C         // q, k, v
                              + C * C                           // o_proj
                              + 3 * H * C;                      // gate, up, down
    return V * C * (tied() ? 1 : 2) + n_layer * per_layer + C;  // + final norm
  }
  const int64_t per_layer = 2 * C                // ln_1
                            + 3 * C * C + 3 * C  // c_attn
                            + C * C + C          // attn.c_proj
                            + 2 * C              // ln_2
                            + 4 * C * C + 4 * C  // c_fc
                            + 4 * C * C + C;     // mlp.c_proj
  return V * C + static_cast<int64_t>(max_seq_len) * C + n_layer * per_layer + 2 * C;
}

double ModelConfig::flops_per_token(int seq_len) const {
  return 6.0 * static_cast<double>(num_params()) +
         12.0 * n_layer * static_cast<double>(d_model) * seq_len;
}

}  // namespace trainctl::model
