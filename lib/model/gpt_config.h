#pragma once
// Model dimensions as the model layer sees them (it knows nothing of YAML job specs).
#include <cstdint>

namespace trainctl::model {

struct GptConfig {
  int vocab_size = 256;
  int max_seq_len = 128;  // T: learned position table size
  int n_layer = 2;
  int n_head = 4;
  int d_model = 128;

  int head_dim() const { return d_model / n_head; }
  // Parameters with the tied LM head counted once (nanoGPT's get_num_params counts wpe too).
  int64_t num_params() const;
  // Training FLOPs per token, PaLM appendix B: 6N + 12 * n_layer * d_model * seq_len.
  double flops_per_token(int seq_len) const;
};

}  // namespace trainctl::model
