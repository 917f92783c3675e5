#include "model/gpt_decode.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace trainctl::model {

namespace {

std::vector<float> load_tensor(const WeightLoader& load, const std::string& name, size_t numel) {
  std::vector<float> t(numel);
  load(name, t.data(), numel);
  return t;
}

std::vector<std::pair<std::string, std::vector<int64_t>>> llama_shapes(const ModelConfig& c) {
  const int64_t C = c.d_model, V = c.vocab_size, H = c.mlp_hidden(), hd = c.head_dim();
  const int64_t q = int64_t{c.n_head} * hd, kv = int64_t{c.kv_heads()} * hd;
  std::vector<std::pair<std::string, std::vector<int64_t>>> shapes = {
      {"model.embed_tokens.weight", {V, C}}};
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    shapes.push_back({p + "input_layernorm.weight", {C}});
    shapes.push_back({p + "self_attn.q_proj.weight", {q, C}});
    shapes.push_back({p + "self_attn.k_proj.weight", {kv, C}});
    shapes.push_back({p + "self_attn.v_proj.weight", {kv, C}});
    shapes.push_back({p + "self_attn.o_proj.weight", {C, q}});
    shapes.push_back({p + "post_attention_layernorm.weight", {C}});
    shapes.push_back({p + "mlp.gate_proj.weight", {H, C}});
    shapes.push_back({p + "mlp.up_proj.weight", {H, C}});
    shapes.push_back({p + "mlp.down_proj.weight", {C, H}});
  }
  shapes.push_back({"model.norm.weight", {C}});
  if (!c.tied()) shapes.push_back({"lm_head.weight", {V, C}});
  return shapes;
}

}  // namespace

std::vector<std::pair<std::string, std::vector<int64_t>>> GptDecoder::parameter_shapes(
    const ModelConfig& c) {
  if (c.llama()) return llama_shapes(c);
  const int64_t C = c.d_model, V = c.vocab_size, T = c.max_seq_len;
  std::vector<std::pair<std::string, std::vector<int64_t>>> shapes = {
      {"transformer.wte.weight", {V, C}}, {"transformer.wpe.weight", {T, C}}};
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string p = "transformer.h." + std::to_string(l) + ".";
    shapes.push_back({p + "ln_1.weight", {C}});
    shapes.push_back({p + "ln_1.bias", {C}});
    shapes.push_back({p + "attn.c_attn.weight", {3 * C, C}});
    shapes.push_back({p + "attn.c_attn.bias", {3 * C}});
    shapes.push_back({p + "attn.c_proj.weight", {C, C}});
    shapes.push_back({p + "attn.c_proj.bias", {C}});
    shapes.push_back({p + "ln_2.weight", {C}});
    shapes.push_back({p + "ln_2.bias", {C}});
    shapes.push_back({p + "mlp.c_fc.weight", {4 * C, C}});
    shapes.push_back({p + "mlp.c_fc.bias", {4 * C}});
    shapes.push_back({p + "mlp.c_proj.weight", {C, 4 * C}});
    shapes.push_back({p + "mlp.c_proj.bias", {C}});
  }
  shapes.push_back({"transformer.ln_f.weight", {C}});
  shapes.push_back({"transformer.ln_f.bias", {C}});
  return shapes;
}

GptDecoder::GptDecoder(const ModelConfig& config, ops::Backend& backend, const WeightLoader& load)
    : config_(config), be_(backend) {
  const auto shapes = parameter_shapes(config_);
  std::vector<std::vector<float>> tensors;
  tensors.reserve(shapes.size());
  for (const auto& [name, shape] : shapes) {
    size_t numel = 1;
    for (int64_t d : shape) numel *= static_cast<size_t>(d);
    tensors.push_back(load_tensor(load, name, numel));
  }
  size_t i = 0;
  const size_t cache = static_cast<size_t>(config_.max_seq_len) * config_.kv_heads() *
                       static_cast<size_t>(config_.head_dim());
  // Row-major [rows, C] matrices stacked along rows are one contiguous [sum rows, C].
  auto stack = [&](int n) {
    std::vector<float> out;
    for (int k = 0; k < n; ++k) {
      out.insert(out.end(), tensors[i].begin(), tensors[i].end());
      ++i;
    }
    return out;
  };
  wte_ = std::move(tensors[i++]);
  if (!config_.llama()) wpe_ = std::move(tensors[i++]);
  for (int l = 0; l < config_.n_layer; ++l) {
    Block b;
    if (config_.llama()) {
      b.ln1_w = std::move(tensors[i++]);
      b.attn_w = stack(3);
      b.proj_w = std::move(tensors[i++]);
      b.ln2_w = std::move(tensors[i++]);
      b.fc_w = stack(2);
      b.fc_proj_w = std::move(tensors[i++]);
    } else {
      for (std::vector<float>* t :
           {&b.ln1_w, &b.ln1_b, &b.attn_w, &b.attn_b, &b.proj_w, &b.proj_b, &b.ln2_w, &b.ln2_b,
            &b.fc_w, &b.fc_b, &b.fc_proj_w, &b.fc_proj_b}) {
        *t = std::move(tensors[i++]);
      }
    }
    b.k_cache.assign(cache, 0.0f);
    b.v_cache.assign(cache, 0.0f);
    blocks_.push_back(std::move(b));
  }
  lnf_w_ = std::move(tensors[i++]);
  if (!config_.llama()) lnf_b_ = std::move(tensors[i++]);
  if (i < tensors.size()) lm_head_ = std::move(tensors[i++]);
}

void GptDecoder::norm(float* out, const float* x, const std::vector<float>& w,
                      const std::vector<float>& b, int N) {
  const int C = config_.d_model;
  stats_.resize(2 * static_cast<size_t>(N));
  if (config_.llama()) {
    be_.rmsnorm_forward(out, stats_.data(), x, w.data(), N, C, config_.norm_eps);
  } else {
    be_.layernorm_forward(out, stats_.data(), stats_.data() + N, x, w.data(), b.data(), N, C);
  }
}

// x += mlp(norm_2(x)) for N rows.
void GptDecoder::block_mlp(const Block& b, float* x, int N) {
  const int C = config_.d_model, H = config_.mlp_hidden();
  const int fc_width = config_.llama() ? 2 * H : H;
  const size_t NC = static_cast<size_t>(N) * C;
  h_.resize(NC);
  fc_.resize(static_cast<size_t>(N) * fc_width);
  y_.resize(static_cast<size_t>(N) * H);
  norm(h_.data(), x, b.ln2_w, b.ln2_b, N);
  be_.linear_forward(fc_.data(), h_.data(), b.fc_w.data(), bias(b.fc_b), N, C, fc_width);
  if (config_.llama()) {
    be_.swiglu_forward(y_.data(), fc_.data(), N, H);
  } else {
    be_.gelu_forward(y_.data(), fc_.data(), static_cast<size_t>(N) * H);
  }
  be_.linear_forward(h_.data(), y_.data(), b.fc_proj_w.data(), bias(b.fc_proj_b), N, H, C);
  be_.add(x, x, h_.data(), NC);
}

const std::vector<float>& GptDecoder::step(int32_t token) {
  const int C = config_.d_model, NH = config_.n_head, hd = config_.head_dim();
  const int NKV = config_.kv_heads(), group = NH / NKV;
  const int q_width = NH * hd, kv_width = NKV * hd, W = q_width + 2 * kv_width;
  if (token < 0 || token >= config_.vocab_size) {
    throw std::out_of_range("token " + std::to_string(token) + " is outside the vocabulary (" +
                            std::to_string(config_.vocab_size) + ")");
  }
  if (pos_ >= config_.max_seq_len) {
    throw std::out_of_range("the key/value cache is full (max_seq_len " +
                            std::to_string(config_.max_seq_len) + ")");
  }
  const size_t t = static_cast<size_t>(pos_);
  x_.resize(C);
  for (int c = 0; c < C; ++c) {
    x_[c] = wte_[static_cast<size_t>(token) * C + c] + (wpe_.empty() ? 0.0f : wpe_[t * C + c]);
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  std::vector<float> att(t + 1), y(static_cast<size_t>(q_width)), proj(C);
  for (Block& b : blocks_) {
    h_.resize(C);
    qkv_.resize(static_cast<size_t>(W));
    norm(h_.data(), x_.data(), b.ln1_w, b.ln1_b, 1);
    be_.linear_forward(qkv_.data(), h_.data(), b.attn_w.data(), bias(b.attn_b), 1, C, W);
    if (config_.llama()) {
      be_.rope_forward(qkv_.data(), 1, 1, W, NH + NKV, hd, config_.rope_theta, pos_);
    }
    std::copy_n(qkv_.data() + q_width, kv_width, b.k_cache.data() + t * kv_width);
    std::copy_n(qkv_.data() + q_width + kv_width, kv_width, b.v_cache.data() + t * kv_width);
    for (int head = 0; head < NH; ++head) {
      const float* q = qkv_.data() + static_cast<size_t>(head) * hd;
      const size_t kv_off = static_cast<size_t>(head / group) * hd;
      float max_score = -INFINITY;
      for (size_t j = 0; j <= t; ++j) {
        const float* k = b.k_cache.data() + j * kv_width + kv_off;
        float dot = 0.0f;
        for (int d = 0; d < hd; ++d) dot += q[d] * k[d];
        att[j] = dot * scale;
        max_score = std::max(max_score, att[j]);
      }
      double sum = 0.0;
      for (size_t j = 0; j <= t; ++j) {
        att[j] = std::exp(att[j] - max_score);
        sum += att[j];
      }
      float* out = y.data() + static_cast<size_t>(head) * hd;
      std::fill_n(out, hd, 0.0f);
      for (size_t j = 0; j <= t; ++j) {
        const float p = static_cast<float>(att[j] / sum);
        const float* v = b.v_cache.data() + j * kv_width + kv_off;
        for (int d = 0; d < hd; ++d) out[d] += p * v[d];
      }
    }
    be_.linear_forward(proj.data(), y.data(), b.proj_w.data(), bias(b.proj_b), 1, q_width, C);
    be_.add(x_.data(), x_.data(), proj.data(), C);
    block_mlp(b, x_.data(), 1);
  }
  h_.resize(C);
  norm(h_.data(), x_.data(), lnf_w_, lnf_b_, 1);
  logits_.resize(static_cast<size_t>(config_.vocab_size));
  be_.linear_forward(logits_.data(), h_.data(), head(), nullptr, 1, C, config_.vocab_size);
  ++pos_;
  return logits_;
}

std::vector<float> GptDecoder::forward_full(const std::vector<int32_t>& tokens) {
  const int C = config_.d_model, NH = config_.n_head, V = config_.vocab_size;
  const int hd = config_.head_dim(), NKV = config_.kv_heads();
  const int T = static_cast<int>(tokens.size());
  if (T < 1 || T > config_.max_seq_len) {
    throw std::out_of_range("forward_full: " + std::to_string(T) + " tokens, max_seq_len " +
                            std::to_string(config_.max_seq_len));
  }
  for (int32_t token : tokens) {
    if (token < 0 || token >= V) throw std::out_of_range("forward_full: token out of vocabulary");
  }
  const ops::AttentionShape shape{1, T, NH, NKV, hd};
  const int W = shape.qkv_width();
  const size_t NC = static_cast<size_t>(T) * C;
  std::vector<float> x(NC), qkv(static_cast<size_t>(T) * W), att(NC),
      lse(static_cast<size_t>(NH) * T), proj(NC);
  be_.embedding_forward(x.data(), tokens.data(), wte_.data(), ops::VocabRange{0, V},
                        wpe_.empty() ? nullptr : wpe_.data(), 1, T, C);
  for (const Block& b : blocks_) {
    h_.resize(NC);
    norm(h_.data(), x.data(), b.ln1_w, b.ln1_b, T);
    be_.linear_forward(qkv.data(), h_.data(), b.attn_w.data(), bias(b.attn_b), T, C, W);
    if (config_.llama()) {
      be_.rope_forward(qkv.data(), 1, T, W, NH + NKV, hd, config_.rope_theta, 0);
    }
    be_.attention_forward(att.data(), lse.data(), qkv.data(), shape);
    be_.linear_forward(proj.data(), att.data(), b.proj_w.data(), bias(b.proj_b), T, C, C);
    be_.add(x.data(), x.data(), proj.data(), NC);
    block_mlp(b, x.data(), T);
  }
  h_.resize(NC);
  norm(h_.data(), x.data(), lnf_w_, lnf_b_, T);
  std::vector<float> logits(static_cast<size_t>(T) * V);
  be_.linear_forward(logits.data(), h_.data(), head(), nullptr, T, C, V);
  return logits;
}

}  // namespace trainctl::model
