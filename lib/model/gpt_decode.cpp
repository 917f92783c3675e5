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

}  // namespace

std::vector<std::pair<std::string, std::vector<int64_t>>> GptDecoder::parameter_shapes(
    const GptConfig& c) {
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

GptDecoder::GptDecoder(const GptConfig& config, ops::Backend& backend, const WeightLoader& load)
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
  wte_ = std::move(tensors[i++]);
  wpe_ = std::move(tensors[i++]);
  const size_t cache = static_cast<size_t>(config_.max_seq_len) * config_.d_model;
  for (int l = 0; l < config_.n_layer; ++l) {
    Block b;
    for (std::vector<float>* t :
         {&b.ln1_w, &b.ln1_b, &b.attn_w, &b.attn_b, &b.proj_w, &b.proj_b, &b.ln2_w, &b.ln2_b,
          &b.fc_w, &b.fc_b, &b.fc_proj_w, &b.fc_proj_b}) {
      *t = std::move(tensors[i++]);
    }
    b.k_cache.assign(cache, 0.0f);
    b.v_cache.assign(cache, 0.0f);
    blocks_.push_back(std::move(b));
  }
  lnf_w_ = std::move(tensors[i++]);
  lnf_b_ = std::move(tensors[i++]);
}

// x += mlp(ln_2(x)) for N rows; qkv_/y_ hold the attention output the caller added before.
void GptDecoder::block_mlp(const Block& b, float* x, int N) {
  const int C = config_.d_model;
  const size_t NC = static_cast<size_t>(N) * C;
  h_.resize(NC);
  stats_.resize(2 * static_cast<size_t>(N));
  fc_.resize(4 * NC);
  y_.resize(4 * NC);
  be_.layernorm_forward(h_.data(), stats_.data(), stats_.data() + N, x, b.ln2_w.data(),
                        b.ln2_b.data(), N, C);
  be_.linear_forward(fc_.data(), h_.data(), b.fc_w.data(), b.fc_b.data(), N, C, 4 * C);
  be_.gelu_forward(y_.data(), fc_.data(), 4 * NC);
  be_.linear_forward(h_.data(), y_.data(), b.fc_proj_w.data(), b.fc_proj_b.data(), N, 4 * C, C);
  be_.add(x, x, h_.data(), NC);
}

const std::vector<float>& GptDecoder::step(int32_t token) {
  const int C = config_.d_model, NH = config_.n_head, hd = config_.head_dim();
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
    x_[c] = wte_[static_cast<size_t>(token) * C + c] + wpe_[t * C + c];
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  std::vector<float> att(t + 1), y(C), proj(C);
  for (Block& b : blocks_) {
    h_.resize(C);
    stats_.resize(2);
    qkv_.resize(3 * static_cast<size_t>(C));
    be_.layernorm_forward(h_.data(), stats_.data(), stats_.data() + 1, x_.data(), b.ln1_w.data(),
                          b.ln1_b.data(), 1, C);
    be_.linear_forward(qkv_.data(), h_.data(), b.attn_w.data(), b.attn_b.data(), 1, C, 3 * C);
    std::copy_n(qkv_.data() + C, C, b.k_cache.data() + t * C);
    std::copy_n(qkv_.data() + 2 * C, C, b.v_cache.data() + t * C);
    for (int head = 0; head < NH; ++head) {
      const float* q = qkv_.data() + static_cast<size_t>(head) * hd;
      float max_score = -INFINITY;
      for (size_t j = 0; j <= t; ++j) {
        const float* k = b.k_cache.data() + j * C + static_cast<size_t>(head) * hd;
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
        const float* v = b.v_cache.data() + j * C + static_cast<size_t>(head) * hd;
        for (int d = 0; d < hd; ++d) out[d] += p * v[d];
      }
    }
    be_.linear_forward(proj.data(), y.data(), b.proj_w.data(), b.proj_b.data(), 1, C, C);
    be_.add(x_.data(), x_.data(), proj.data(), C);
    block_mlp(b, x_.data(), 1);
  }
  h_.resize(C);
  stats_.resize(2);
  be_.layernorm_forward(h_.data(), stats_.data(), stats_.data() + 1, x_.data(), lnf_w_.data(),
                        lnf_b_.data(), 1, C);
  logits_.resize(static_cast<size_t>(config_.vocab_size));
  be_.linear_forward(logits_.data(), h_.data(), wte_.data(), nullptr, 1, C, config_.vocab_size);
  ++pos_;
  return logits_;
}

std::vector<float> GptDecoder::forward_full(const std::vector<int32_t>& tokens) {
  const int C = config_.d_model, NH = config_.n_head, V = config_.vocab_size;
  const int T = static_cast<int>(tokens.size());
  if (T < 1 || T > config_.max_seq_len) {
    throw std::out_of_range("forward_full: " + std::to_string(T) + " tokens, max_seq_len " +
                            std::to_string(config_.max_seq_len));
  }
  for (int32_t token : tokens) {
    if (token < 0 || token >= V) throw std::out_of_range("forward_full: token out of vocabulary");
  }
  const size_t NC = static_cast<size_t>(T) * C;
  std::vector<float> x(NC), qkv(3 * NC), att(NC), lse(static_cast<size_t>(NH) * T), proj(NC);
  be_.embedding_forward(x.data(), tokens.data(), wte_.data(), ops::VocabRange{0, V}, wpe_.data(), 1,
                        T, C);
  for (const Block& b : blocks_) {
    h_.resize(NC);
    stats_.resize(2 * static_cast<size_t>(T));
    be_.layernorm_forward(h_.data(), stats_.data(), stats_.data() + T, x.data(), b.ln1_w.data(),
                          b.ln1_b.data(), T, C);
    be_.linear_forward(qkv.data(), h_.data(), b.attn_w.data(), b.attn_b.data(), T, C, 3 * C);
    be_.attention_forward(att.data(), lse.data(), qkv.data(), 1, T, C, NH);
    be_.linear_forward(proj.data(), att.data(), b.proj_w.data(), b.proj_b.data(), T, C, C);
    be_.add(x.data(), x.data(), proj.data(), NC);
    block_mlp(b, x.data(), T);
  }
  h_.resize(NC);
  stats_.resize(2 * static_cast<size_t>(T));
  be_.layernorm_forward(h_.data(), stats_.data(), stats_.data() + T, x.data(), lnf_w_.data(),
                        lnf_b_.data(), T, C);
  std::vector<float> logits(static_cast<size_t>(T) * V);
  be_.linear_forward(logits.data(), h_.data(), wte_.data(), nullptr, T, C, V);
  return logits;
}

}  // namespace trainctl::model
