#pragma once
// Model dimensions as the model layer sees them (it knows nothing of YAML job specs): one
// decoder-only transformer, in one of two architecture families.
//   gpt:   nanoGPT's GPT-2 — learned positions, LayerNorm with biases, 4x MLP with tanh-GELU,
//          biases everywhere, LM head tied to the token embedding.
//   llama: Meta's Llama 2/3 — rotary position embeddings (rope_theta), RMSNorm (norm_eps),
//          SwiGLU MLP of width ffn_hidden, grouped-query attention (n_kv_head k/v heads),
//          no biases, untied LM head unless tie_embeddings.
#include <cstdint>

namespace trainctl::model {

enum class Family { gpt, llama };
const char* to_string(Family f);

// Mixture of experts in the feed-forward slot (model/moe/moe_ffn.h): each selected layer's
// MLP becomes num_experts experts of width expert_ffn_hidden in the family's own kind
// (llama: SwiGLU, Mixtral; gpt: GELU with biases), top_k of them per token, plus
// shared_experts that every token uses.
enum class MoeScore { softmax, sigmoid };
struct MoeConfig {
  int num_experts = 0;  // 0: no MoE (every layer dense)
  int top_k = 2;
  int expert_ffn_hidden = 0;
  int shared_experts = 0;
  MoeScore score = MoeScore::softmax;
  // The auxiliary load-balancing loss (sequence-wise, DeepSeek-V3's form); 0 = none.
  float aux_loss_coef = 0.0f;
  // balance: bias (auxiliary-loss-free, DeepSeek-V3): each step moves every expert's
  // selection bias by this much towards balance (model/moe/router.h); 0 = no bias.
  float bias_update_rate = 0.0f;
  // Per micro-batch, an expert takes at most ceil(capacity_factor * tokens * top_k /
  // num_experts) tokens, the earliest in the micro-batch; 0 = dropless.
  float capacity_factor = 0.0f;
  // Which layers: l >= layers_from and (l - layers_from + 1) % layers_every == 0
  // (all: every 1 from 0; every_N: every 1, from 0 with step N; from_K: every 1 from K).
  int layers_every = 1;
  int layers_from = 0;

  bool enabled() const { return num_experts > 0; }
  bool expert_bias() const { return bias_update_rate > 0.0f; }
  bool layer(int l) const {
    return enabled() && l >= layers_from && (l - layers_from + 1) % layers_every == 0;
  }
  bool operator==(const MoeConfig&) const = default;
};

struct ModelConfig {
  int vocab_size = 256;
  int max_seq_len = 128;  // T: the longest sequence (gpt: the learned position table's size)
  int n_layer = 2;
  int n_head = 4;
  int d_model = 128;
  Family family = Family::gpt;
  // Llama family (gpt ignores them: n_kv_head = n_head, ffn 4 d_model, tied).
  int n_kv_head = 0;   // 0 = n_head
  int ffn_hidden = 0;  // 0 = 4 d_model
  float norm_eps = 1e-5f;
  float rope_theta = 10000.0f;
  bool tie_embeddings = true;
  MoeConfig moe = {};  // num_experts 0: dense

  bool llama() const { return family == Family::llama; }
  int head_dim() const { return d_model / n_head; }
  int kv_heads() const { return llama() && n_kv_head > 0 ? n_kv_head : n_head; }
  int mlp_hidden() const { return llama() && ffn_hidden > 0 ? ffn_hidden : 4 * d_model; }
  bool tied() const { return !llama() || tie_embeddings; }
  // Rows of the fused q | k | v projection: (n_head + 2 n_kv_head) * head_dim.
  int qkv_rows() const { return (n_head + 2 * kv_heads()) * head_dim(); }
  // Parameters with a tied LM head counted once (nanoGPT's get_num_params counts wpe too);
  // with MoE, every expert.
  int64_t num_params() const;
  // Parameters one token uses: with MoE, top_k routed experts (and the shared ones) per MoE
  // layer instead of all; the whole model otherwise.
  int64_t active_params() const;
  int moe_layers() const;
  // Training FLOPs per token, PaLM appendix B: 6N (N active) + 12 * n_layer * d_model * seq_len.
  double flops_per_token(int seq_len) const;

  bool operator==(const ModelConfig&) const = default;
};

}  // namespace trainctl::model
