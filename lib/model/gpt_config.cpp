#include "model/gpt_config.h"

namespace trainctl::model {

int64_t GptConfig::num_params() const {
  const int64_t C = d_model;
  const int64_t per_layer = 2 * C                // ln_1
                            + 3 * C * C + 3 * C  // c_attn
                            + C * C + C          // attn.c_proj
                            + 2 * C              // ln_2
                            + 4 * C * C + 4 * C  // c_fc
                            + 4 * C * C + C;     // mlp.c_proj
  return static_cast<int64_t>(vocab_size) * C + static_cast<int64_t>(max_seq_len) * C +
         n_layer * per_layer + 2 * C;
}

double GptConfig::flops_per_token(int seq_len) const {
  return 6.0 * static_cast<double>(num_params()) +
         12.0 * n_layer * static_cast<double>(d_model) * seq_len;
}

}  // namespace trainctl::model
