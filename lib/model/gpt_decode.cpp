#include "model/gpt_decode.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "model/shard.h"

namespace trainctl::model {

// The training model's parameters, whole (model/model_parts.h declares them).
std::vector<std::pair<std::string, std::vector<int64_t>>> GptDecoder::parameter_shapes(
    const ModelConfig& c) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> shapes;
  for (const ParamSpec& p : gpt_param_specs(c, GptShardSpec::whole(c))) {
    shapes.emplace_back(p.name, p.shard.global_shape);
  }
  return shapes;
}

GptDecoder::GptDecoder(const ModelConfig& config, ops::Backend& backend, const WeightLoader& load)
    : config_(config), be_(backend) {
  if (config_.moe.enabled()) {
    // The one-token step of an MoE feed-forward is not written yet (docs/ARCHITECTURE.md,
    // "The model as blocks", 8).
    throw std::invalid_argument(
        "sampling a mixture-of-experts model is not supported yet; evaluate it with "
        "`trainctl eval` instead");
  }
  const auto shapes = parameter_shapes(config_);
  size_t i = 0;
  // The next parameter in loading order, in host memory.
  auto next = [&] {
    const auto& [name, shape] = shapes.at(i++);
    size_t numel = 1;
    for (int64_t d : shape) numel *= static_cast<size_t>(d);
    std::vector<float> t(numel);
    load(name, t.data(), numel);
    return t;
  };
  // Row-major [rows, C] matrices stacked along rows are one contiguous [sum rows, C].
  auto next_stacked = [&](int n) {
    std::vector<float> out;
    for (int k = 0; k < n; ++k) {
      const std::vector<float> t = next();
      out.insert(out.end(), t.begin(), t.end());
    }
    return out;
  };
  const size_t cache = KvCache::floats(config_);
  try {
    wte_ = upload(next());
    if (!config_.llama()) wpe_ = upload(next());
    for (int l = 0; l < config_.n_layer; ++l) {
      Block b;
      if (config_.llama()) {
        b.ln1_w = upload(next());
        b.attn_w = upload(next_stacked(3));
        b.proj_w = upload(next());
        b.ln2_w = upload(next());
        b.fc_w = upload(next_stacked(2));
        b.fc_proj_w = upload(next());
      } else {
        for (const float** t : {&b.ln1_w, &b.ln1_b, &b.attn_w, &b.attn_b, &b.proj_w, &b.proj_b,
                                &b.ln2_w, &b.ln2_b, &b.fc_w, &b.fc_b, &b.fc_proj_w, &b.fc_proj_b}) {
          *t = upload(next());
        }
      }
      b.cache = {alloc(cache), alloc(cache)};
      blocks_.push_back(b);
    }
    lnf_w_ = upload(next());
    if (!config_.llama()) lnf_b_ = upload(next());
    if (i < shapes.size()) lm_head_ = upload(next());
  } catch (...) {
    for (void* p : owned_) be_.free(p);
    throw;
  }
}

GptDecoder::~GptDecoder() {
  for (Scratch* s : {&x_, &h_, &qkv_, &att_, &proj_, &stats_, &fc_, &y_, &logits_dev_}) {
    if (s->p != nullptr) be_.free(s->p);
  }
  for (void* p : owned_) be_.free(p);
}

float* GptDecoder::alloc(size_t n) {
  void* p = be_.alloc(std::max<size_t>(n, 1) * sizeof(float));
  owned_.push_back(p);
  return static_cast<float*>(p);
}

float* GptDecoder::upload(const std::vector<float>& host) {
  float* p = alloc(host.size());
  be_.copy(p, host.data(), host.size());
  return p;
}

float* GptDecoder::grow(Scratch& s, size_t n) {
  if (n > s.n) {
    if (s.p != nullptr) be_.free(s.p);
    s.p = nullptr;
    s.n = 0;
    s.p = static_cast<float*>(be_.alloc(n * sizeof(float)));
    s.n = n;
  }
  return s.p;
}

void GptDecoder::norm(float* out, const float* x, const float* w, const float* b, int N) {
  const int C = config_.d_model;
  float* stats = grow(stats_, 2 * static_cast<size_t>(N));
  if (config_.llama()) {
    be_.rmsnorm_forward(out, stats, x, w, N, C, config_.norm_eps);
  } else {
    be_.layernorm_forward(out, stats, stats + N, x, w, b, N, C);
  }
}

// x += mlp(norm_2(x)) for N rows.
void GptDecoder::block_mlp(const Block& b, float* x, int N) {
  const int C = config_.d_model, H = config_.mlp_hidden();
  const int fc_width = config_.llama() ? 2 * H : H;
  const size_t NC = static_cast<size_t>(N) * C;
  float* h = grow(h_, NC);
  float* fc = grow(fc_, static_cast<size_t>(N) * fc_width);
  float* y = grow(y_, static_cast<size_t>(N) * H);
  norm(h, x, b.ln2_w, b.ln2_b, N);
  be_.linear_forward(fc, h, b.fc_w, b.fc_b, N, C, fc_width);
  if (config_.llama()) {
    be_.swiglu_forward(y, fc, N, H);
  } else {
    be_.gelu_forward(y, fc, static_cast<size_t>(N) * H);
  }
  be_.linear_forward(h, y, b.fc_proj_w, b.fc_proj_b, N, H, C);
  be_.add(x, x, h, NC);
}

const std::vector<float>& GptDecoder::step(int32_t token) {
  const int C = config_.d_model, NH = config_.n_head, hd = config_.head_dim();
  const int NKV = config_.kv_heads(), V = config_.vocab_size;
  const int q_width = NH * hd, kv_width = NKV * hd, W = q_width + 2 * kv_width;
  if (token < 0 || token >= V) {
    throw std::out_of_range("token " + std::to_string(token) + " is outside the vocabulary (" +
                            std::to_string(V) + ")");
  }
  if (pos_ >= config_.max_seq_len) {
    throw std::out_of_range("the key/value cache is full (max_seq_len " +
                            std::to_string(config_.max_seq_len) + ")");
  }
  const size_t t = static_cast<size_t>(pos_);
  float* x = grow(x_, static_cast<size_t>(C));
  float* h = grow(h_, static_cast<size_t>(C));
  float* qkv = grow(qkv_, static_cast<size_t>(W));
  float* y = grow(att_, static_cast<size_t>(q_width));
  float* proj = grow(proj_, static_cast<size_t>(C));
  // This position's row of wpe: the embedding op adds row 0 of the table it is given.
  be_.embedding_forward(x, &token, wte_, ops::VocabRange{0, V},
                        wpe_ != nullptr ? wpe_ + t * static_cast<size_t>(C) : nullptr, 1, 1, C);
  for (const Block& b : blocks_) {
    norm(h, x, b.ln1_w, b.ln1_b, 1);
    be_.linear_forward(qkv, h, b.attn_w, b.attn_b, 1, C, W);
    b.cache.attend(be_, config_, qkv, pos_, y);
    be_.linear_forward(proj, y, b.proj_w, b.proj_b, 1, q_width, C);
    be_.add(x, x, proj, static_cast<size_t>(C));
    block_mlp(b, x, 1);
  }
  h = grow(h_, static_cast<size_t>(C));  // block_mlp may have grown it
  norm(h, x, lnf_w_, lnf_b_, 1);
  float* logits = grow(logits_dev_, static_cast<size_t>(V));
  be_.linear_forward(logits, h, head(), nullptr, 1, C, V);
  logits_.resize(static_cast<size_t>(V));
  be_.copy(logits_.data(), logits, logits_.size());  // to the host (waits for the device)
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
  float* x = grow(x_, NC);
  float* qkv = grow(qkv_, static_cast<size_t>(T) * W);
  float* att = grow(att_, NC);
  float* proj = grow(proj_, NC);
  Scratch lse_scratch;
  float* lse = grow(lse_scratch, static_cast<size_t>(NH) * T);
  std::vector<float> logits(static_cast<size_t>(T) * V);
  try {
    be_.embedding_forward(x, tokens.data(), wte_, ops::VocabRange{0, V}, wpe_, 1, T, C);
    for (const Block& b : blocks_) {
      float* h = grow(h_, NC);
      norm(h, x, b.ln1_w, b.ln1_b, T);
      be_.linear_forward(qkv, h, b.attn_w, b.attn_b, T, C, W);
      if (config_.llama()) {
        be_.rope_forward(qkv, 1, T, W, NH + NKV, hd, config_.rope_theta, 0);
      }
      be_.attention_forward(att, lse, qkv, shape);
      be_.linear_forward(proj, att, b.proj_w, b.proj_b, T, C, C);
      be_.add(x, x, proj, NC);
      block_mlp(b, x, T);
    }
    float* h = grow(h_, NC);
    norm(h, x, lnf_w_, lnf_b_, T);
    float* out = grow(logits_dev_, logits.size());
    be_.linear_forward(out, h, head(), nullptr, T, C, V);
    be_.copy(logits.data(), out, logits.size());
  } catch (...) {
    be_.free(lse_scratch.p);
    throw;
  }
  be_.free(lse_scratch.p);
  return logits;
}

}  // namespace trainctl::model
