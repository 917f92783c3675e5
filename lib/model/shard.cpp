#include "model/shard.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace trainctl::model {

Shape TensorShard::local_shape() const {
  Shape s = global_shape;
  if (split()) s[static_cast<size_t>(dim)] /= count;
  return s;
}

std::vector<std::pair<int64_t, int64_t>> TensorShard::runs() const {
  if (!split()) {
    const int64_t extent = dim >= 0 ? global_shape[static_cast<size_t>(dim)] : 0;
    return {{0, extent}};
  }
  const int64_t extent = global_shape[static_cast<size_t>(dim)];
  const int64_t block = extent / blocks;
  const int64_t piece = block / count;
  std::vector<std::pair<int64_t, int64_t>> out;
  for (int b = 0; b < blocks; ++b) out.emplace_back(b * block + index * piece, piece);
  return out;
}

int64_t TensorShard::global_index(int64_t local) const {
  if (!split()) return local;
  const Shape local_s = local_shape();
  // Row-major strides: split the flat index into (outer, along dim, inner).
  int64_t inner = 1;
  for (size_t d = static_cast<size_t>(dim) + 1; d < local_s.size(); ++d) inner *= local_s[d];
  const int64_t local_extent = local_s[static_cast<size_t>(dim)];
  const int64_t global_extent = global_shape[static_cast<size_t>(dim)];
  const int64_t outer = local / (local_extent * inner);
  const int64_t along = (local / inner) % local_extent;
  const int64_t in = local % inner;
  const int64_t piece = local_extent / blocks;
  const int64_t block_len = global_extent / blocks;
  const int64_t g_along = (along / piece) * block_len + index * piece + along % piece;
  return (outer * global_extent + g_along) * inner + in;
}

double block_cost(const ModelConfig& c, int seq_len) {
  // Multiply-adds per token: 12 C^2 in the linear layers, 2 T C in attention (causal: half
  // of T on average for scores and for the weighted sum).
  const double C = c.d_model;
  if (c.llama()) {
    // q, k, v, o and SwiGLU's three matrices.
    const double linear = (c.qkv_rows() + C) * C + 3.0 * c.mlp_hidden() * C;
    return linear + 2.0 * static_cast<double>(seq_len) * C;
  }
  return 12.0 * C * C + 2.0 * static_cast<double>(seq_len) * C;
}

double head_cost(const ModelConfig& c) { return static_cast<double>(c.vocab_size) * c.d_model; }

std::vector<LayerRange> partition_layers(const ModelConfig& config, int seq_len, int parts) {
  const int L = config.n_layer;
  if (parts < 1 || parts > L) {
    throw std::invalid_argument("cannot split " + std::to_string(L) + " transformer blocks into " +
                                std::to_string(parts) + " pipeline stages (at most one stage " +
                                "per block)");
  }
  const double blk = block_cost(config, seq_len);
  const double head = head_cost(config);
  // The embedding is a gather (no products) but its backward scatters into wte: count it
  // as a small fixed share of a block so ties go to the later stages.
  const double embed = 0.05 * blk;
  auto cost = [&](int first, int end, bool is_first, bool is_last) {
    return (end - first) * blk + (is_first ? embed : 0.0) + (is_last ? head : 0.0);
  };
  // best[p][l]: the cheapest maximum over the first p parts covering blocks [0, l).
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(static_cast<size_t>(parts) + 1,
                                        std::vector<double>(static_cast<size_t>(L) + 1, inf));
  std::vector<std::vector<int>> cut(static_cast<size_t>(parts) + 1,
                                    std::vector<int>(static_cast<size_t>(L) + 1, 0));
  best[0][0] = 0.0;
  for (int p = 1; p <= parts; ++p) {
    for (int l = p; l <= L; ++l) {
      for (int k = p - 1; k < l; ++k) {
        const double prev = best[static_cast<size_t>(p) - 1][static_cast<size_t>(k)];
        if (prev == inf) continue;
        const double m = std::max(prev, cost(k, l, p == 1, p == parts && l == L));
        // Strictly better only: equal costs keep the earliest cut, giving later parts
        // (which also hold the head) fewer blocks.
        if (m < best[static_cast<size_t>(p)][static_cast<size_t>(l)]) {
          best[static_cast<size_t>(p)][static_cast<size_t>(l)] = m;
          cut[static_cast<size_t>(p)][static_cast<size_t>(l)] = k;
        }
      }
    }
  }
  std::vector<LayerRange> out(static_cast<size_t>(parts));
  int end = L;
  for (int p = parts; p >= 1; --p) {
    const int begin = cut[static_cast<size_t>(p)][static_cast<size_t>(end)];
    out[static_cast<size_t>(p) - 1] = {begin, end};
    end = begin;
  }
  return out;
}

GptShardSpec GptShardSpec::whole(const ModelConfig& config) {
  GptShardSpec s;
  s.chunks = {{0, config.n_layer}};
  return s;
}

GptShardSpec GptShardSpec::of(const ModelConfig& config, int seq_len, int pp, int pp_rank,
                              int virtual_stages, int tp, int tp_rank) {
  if (pp < 1 || pp_rank < 0 || pp_rank >= pp || virtual_stages < 1 || tp < 1 || tp_rank < 0 ||
      tp_rank >= tp) {
    throw std::invalid_argument("GptShardSpec::of: invalid layout coordinates");
  }
  const std::vector<LayerRange> parts = partition_layers(config, seq_len, pp * virtual_stages);
  GptShardSpec s;
  for (int c = 0; c < virtual_stages; ++c)
    s.chunks.push_back(parts[static_cast<size_t>(c * pp + pp_rank)]);
  s.embedding = pp_rank == 0;
  s.head = pp_rank == pp - 1;
  s.tp_rank = tp_rank;
  s.tp_size = tp;
  return s;
}

void check_tp_divisible(const ModelConfig& config, int tp) {
  auto need = [&](int value, const char* what) {
    if (value % tp != 0) {
      throw std::invalid_argument(std::string(what) + " (" + std::to_string(value) +
                                  ") must be divisible by parallel.tp (" + std::to_string(tp) +
                                  ")");
    }
  };
  need(config.n_head, "model.n_head");
  need(config.vocab_size, "model.vocab_size");
  if (config.llama()) {
    need(config.kv_heads(), "model.n_kv_head");
    need(config.mlp_hidden(), "model.ffn_hidden");
  }
}

namespace {

ParamSpec param(std::string name, Shape global, Init init, float std_dev, bool decay) {
  ParamSpec p;
  p.name = std::move(name);
  p.shard.global_shape = std::move(global);
  p.init = init;
  p.init_std = std_dev;
  p.weight_decay = decay;
  return p;
}

// Split along `dim` over the TP group (in `blocks` equal blocks).
ParamSpec tp_split(ParamSpec p, const GptShardSpec& s, int dim, int blocks = 1) {
  p.shard.dim = dim;
  p.shard.blocks = blocks;
  p.shard.index = s.tp_rank;
  p.shard.count = s.tp_size;
  return p;
}

// A full copy on every TP rank.
ParamSpec tp_replicated(ParamSpec p, const GptShardSpec& s) {
  p.shard.index = s.tp_rank;
  p.shard.count = s.tp_size;
  return p;
}

}  // namespace

namespace {

// Hugging Face LlamaForCausalLM's names and nn.Linear layouts. q, k and v (and gate and up)
// are separate parameters declared back to back: each splits evenly over the TP group by
// whole heads (rows), which one fused tensor of unequal q and k/v blocks would not.
std::vector<ParamSpec> llama_param_specs(const ModelConfig& config, const GptShardSpec& s) {
  using I = Init;
  const int64_t C = config.d_model, V = config.vocab_size, H = config.mlp_hidden();
  const int64_t hd = config.head_dim();
  constexpr float std0 = 0.02f;
  // Residual projections scaled as GPT-2's (the residual stream's variance stays flat).
  const float std_proj = 0.02f / std::sqrt(2.0f * static_cast<float>(config.n_layer));
  std::vector<ParamSpec> out;
  auto embed = [&] {
    return tp_split(param("model.embed_tokens.weight", {V, C}, I::normal, std0, true), s, 0);
  };
  if (s.embedding) out.push_back(embed());
  for (const LayerRange& chunk : s.chunks) {
    for (int l = chunk.begin; l < chunk.end; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".";
      out.push_back(tp_replicated(param(p + "input_layernorm.weight", {C}, I::ones, 0, false), s));
      out.push_back(tp_split(
          param(p + "self_attn.q_proj.weight", {config.n_head * hd, C}, I::normal, std0, true), s,
          0));
      for (const char* kv : {"self_attn.k_proj.weight", "self_attn.v_proj.weight"}) {
        out.push_back(
            tp_split(param(p + kv, {config.kv_heads() * hd, C}, I::normal, std0, true), s, 0));
      }
      out.push_back(tp_split(
          param(p + "self_attn.o_proj.weight", {C, config.n_head * hd}, I::normal, std_proj, true),
          s, 1));
      out.push_back(
          tp_replicated(param(p + "post_attention_layernorm.weight", {C}, I::ones, 0, false), s));
      out.push_back(
          tp_split(param(p + "mlp.gate_proj.weight", {H, C}, I::normal, std0, true), s, 0));
      out.push_back(tp_split(param(p + "mlp.up_proj.weight", {H, C}, I::normal, std0, true), s, 0));
      out.push_back(
          tp_split(param(p + "mlp.down_proj.weight", {C, H}, I::normal, std_proj, true), s, 1));
    }
  }
  if (s.head) {
    out.push_back(tp_replicated(param("model.norm.weight", {C}, I::ones, 0, false), s));
    if (!config.tied()) {
      out.push_back(tp_split(param("lm_head.weight", {V, C}, I::normal, std0, true), s, 0));
    } else if (s.tied_copy()) {
      ParamSpec copy = embed();
      copy.tied_copy = true;
      out.push_back(std::move(copy));
    }
  }
  return out;
}

}  // namespace

std::vector<ParamSpec> gpt_param_specs(const ModelConfig& config, const GptShardSpec& s) {
  if (config.llama()) return llama_param_specs(config, s);
  using I = Init;
  const int64_t C = config.d_model, V = config.vocab_size;
  constexpr float std0 = 0.02f;
  // GPT-2: residual projections are scaled so the residual stream's variance does not
  // grow with depth.
  const float std_proj = 0.02f / std::sqrt(2.0f * static_cast<float>(config.n_layer));
  std::vector<ParamSpec> out;
  auto wte = [&] {
    return tp_split(param("transformer.wte.weight", {V, C}, I::normal, std0, true), s, 0);
  };
  if (s.embedding) {
    out.push_back(wte());
    out.push_back(tp_replicated(
        param("transformer.wpe.weight", {config.max_seq_len, C}, I::normal, std0, true), s));
  }
  for (const LayerRange& chunk : s.chunks) {
    for (int l = chunk.begin; l < chunk.end; ++l) {
      const std::string p = "transformer.h." + std::to_string(l) + ".";
      out.push_back(tp_replicated(param(p + "ln_1.weight", {C}, I::ones, 0, false), s));
      out.push_back(tp_replicated(param(p + "ln_1.bias", {C}, I::zeros, 0, false), s));
      out.push_back(
          tp_split(param(p + "attn.c_attn.weight", {3 * C, C}, I::normal, std0, true), s, 0, 3));
      out.push_back(tp_split(param(p + "attn.c_attn.bias", {3 * C}, I::zeros, 0, false), s, 0, 3));
      out.push_back(
          tp_split(param(p + "attn.c_proj.weight", {C, C}, I::normal, std_proj, true), s, 1));
      out.push_back(tp_replicated(param(p + "attn.c_proj.bias", {C}, I::zeros, 0, false), s));
      out.push_back(tp_replicated(param(p + "ln_2.weight", {C}, I::ones, 0, false), s));
      out.push_back(tp_replicated(param(p + "ln_2.bias", {C}, I::zeros, 0, false), s));
      out.push_back(
          tp_split(param(p + "mlp.c_fc.weight", {4 * C, C}, I::normal, std0, true), s, 0));
      out.push_back(tp_split(param(p + "mlp.c_fc.bias", {4 * C}, I::zeros, 0, false), s, 0));
      out.push_back(
          tp_split(param(p + "mlp.c_proj.weight", {C, 4 * C}, I::normal, std_proj, true), s, 1));
      out.push_back(tp_replicated(param(p + "mlp.c_proj.bias", {C}, I::zeros, 0, false), s));
    }
  }
  if (s.head) {
    out.push_back(tp_replicated(param("transformer.ln_f.weight", {C}, I::ones, 0, false), s));
    out.push_back(tp_replicated(param("transformer.ln_f.bias", {C}, I::zeros, 0, false), s));
    if (s.tied_copy()) {
      ParamSpec copy = wte();
      copy.tied_copy = true;
      out.push_back(std::move(copy));
    }
  }
  return out;
}

}  // namespace trainctl::model
