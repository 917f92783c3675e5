#include "model/gpt.h"

#include <cmath>
#include <stdexcept>
#include <string>

namespace trainctl::model {

struct Gpt::BlockParams {
  size_t ln1_w, ln1_b, attn_w, attn_b, attn_proj_w, attn_proj_b;
  size_t ln2_w, ln2_b, fc_w, fc_b, fc_proj_w, fc_proj_b;
};

// What one block keeps from forward for its backward.
struct Gpt::BlockActs {
  float *ln1, *ln1_mean, *ln1_rstd;  // [N,C], [N], [N]
  float* qkv;                        // [N,3C]
  float* att;                        // [N,C]  attention output before c_proj
  float* lse;                        // [B,NH,T]
  float* res1;                       // [N,C]  residual stream after attention
  float *ln2, *ln2_mean, *ln2_rstd;  // [N,C], [N], [N]
  float* fc;                         // [N,4C] before GELU
  float* gelu;                       // [N,4C]
  float* res2;                       // [N,C]  residual stream after the MLP: the block output
};

Gpt::Gpt(const GptConfig& config, ops::Backend& backend, int batch, int seq_len)
    : config_(config), backend_(backend), B_(batch), T_(seq_len), params_(backend) {
  if (seq_len > config.max_seq_len) {
    throw std::invalid_argument("sequence length exceeds the model's position table");
  }
  const int64_t C = config.d_model, V = config.vocab_size;
  const float std0 = 0.02f;
  // GPT-2: residual projections are scaled so the residual stream's variance does not
  // grow with depth.
  const float std_proj = 0.02f / std::sqrt(2.0f * static_cast<float>(config.n_layer));

  wte_ = params_.declare("transformer.wte.weight", {V, C}, Init::normal, std0, true);
  wpe_ =
      params_.declare("transformer.wpe.weight", {config.max_seq_len, C}, Init::normal, std0, true);
  for (int l = 0; l < config.n_layer; ++l) {
    const std::string p = "transformer.h." + std::to_string(l) + ".";
    BlockParams b{};
    b.ln1_w = params_.declare(p + "ln_1.weight", {C}, Init::ones, 0, false);
    b.ln1_b = params_.declare(p + "ln_1.bias", {C}, Init::zeros, 0, false);
    b.attn_w = params_.declare(p + "attn.c_attn.weight", {3 * C, C}, Init::normal, std0, true);
    b.attn_b = params_.declare(p + "attn.c_attn.bias", {3 * C}, Init::zeros, 0, false);
    b.attn_proj_w = params_.declare(p + "attn.c_proj.weight", {C, C}, Init::normal, std_proj, true);
    b.attn_proj_b = params_.declare(p + "attn.c_proj.bias", {C}, Init::zeros, 0, false);
    b.ln2_w = params_.declare(p + "ln_2.weight", {C}, Init::ones, 0, false);
    b.ln2_b = params_.declare(p + "ln_2.bias", {C}, Init::zeros, 0, false);
    b.fc_w = params_.declare(p + "mlp.c_fc.weight", {4 * C, C}, Init::normal, std0, true);
    b.fc_b = params_.declare(p + "mlp.c_fc.bias", {4 * C}, Init::zeros, 0, false);
    b.fc_proj_w =
        params_.declare(p + "mlp.c_proj.weight", {C, 4 * C}, Init::normal, std_proj, true);
    b.fc_proj_b = params_.declare(p + "mlp.c_proj.bias", {C}, Init::zeros, 0, false);
    blocks_.push_back(b);
  }
  lnf_w_ = params_.declare("transformer.ln_f.weight", {C}, Init::ones, 0, false);
  lnf_b_ = params_.declare("transformer.ln_f.bias", {C}, Init::zeros, 0, false);
  params_.allocate();

  const size_t N = static_cast<size_t>(B_) * T_;
  const size_t Cs = static_cast<size_t>(C);
  const size_t lse_n = static_cast<size_t>(B_) * config.n_head * T_;
  encoded_ = act(N * Cs);
  for (int l = 0; l < config.n_layer; ++l) {
    BlockActs a{};
    a.ln1 = act(N * Cs);
    a.ln1_mean = act(N);
    a.ln1_rstd = act(N);
    a.qkv = act(N * 3 * Cs);
    a.att = act(N * Cs);
    a.lse = act(lse_n);
    a.res1 = act(N * Cs);
    a.ln2 = act(N * Cs);
    a.ln2_mean = act(N);
    a.ln2_rstd = act(N);
    a.fc = act(N * 4 * Cs);
    a.gelu = act(N * 4 * Cs);
    a.res2 = act(N * Cs);
    acts_.push_back(a);
  }
  lnf_ = act(N * Cs);
  lnf_mean_ = act(N);
  lnf_rstd_ = act(N);
  losses_ = act(N);
  dres_ = act(N * Cs);
  dC_ = act(N * Cs);
  dC2_ = act(N * Cs);
  dqkv_ = act(N * 3 * Cs);
  d4C_a_ = act(N * 4 * Cs);
  d4C_b_ = act(N * 4 * Cs);
  scratchC_ = act(N * Cs);
}

Gpt::~Gpt() {
  for (void* p : buffers_) backend_.free(p);
}

float* Gpt::act(size_t n) {
  void* p = backend_.alloc(n * sizeof(float));
  buffers_.push_back(p);
  return static_cast<float*>(p);
}

void Gpt::init_weights(uint64_t seed) { params_.initialize(seed); }

std::vector<std::pair<int64_t, int64_t>> Gpt::grad_pieces() const {
  std::vector<std::pair<int64_t, int64_t>> pieces;
  int64_t end = params_.total();  // the last block's MLP half runs on through ln_f
  for (int l = config_.n_layer - 1; l >= 0; --l) {
    const BlockParams& b = blocks_[static_cast<size_t>(l)];
    const int64_t attn_begin = params_.at(b.ln1_w).offset;
    const int64_t mlp_begin = params_.at(b.ln2_w).offset;
    pieces.emplace_back(mlp_begin, end);
    pieces.emplace_back(attn_begin, mlp_begin);
    end = attn_begin;
  }
  pieces.emplace_back(params_.at(wte_).offset, end);
  return pieces;
}

void Gpt::block_forward(int l, const float* x) {
  const BlockParams& p = blocks_[static_cast<size_t>(l)];
  BlockActs& a = acts_[static_cast<size_t>(l)];
  const int N = B_ * T_, C = config_.d_model, NH = config_.n_head;
  auto& be = backend_;
  be.layernorm_forward(a.ln1, a.ln1_mean, a.ln1_rstd, x, params_.data(p.ln1_w),
                       params_.data(p.ln1_b), N, C);
  be.linear_forward(a.qkv, a.ln1, params_.data(p.attn_w), params_.data(p.attn_b), N, C, 3 * C);
  be.attention_forward(a.att, a.lse, a.qkv, B_, T_, C, NH);
  be.linear_forward(scratchC_, a.att, params_.data(p.attn_proj_w), params_.data(p.attn_proj_b), N,
                    C, C);
  be.add(a.res1, x, scratchC_, static_cast<size_t>(N) * C);
  be.layernorm_forward(a.ln2, a.ln2_mean, a.ln2_rstd, a.res1, params_.data(p.ln2_w),
                       params_.data(p.ln2_b), N, C);
  be.linear_forward(a.fc, a.ln2, params_.data(p.fc_w), params_.data(p.fc_b), N, C, 4 * C);
  be.gelu_forward(a.gelu, a.fc, static_cast<size_t>(N) * 4 * C);
  be.linear_forward(scratchC_, a.gelu, params_.data(p.fc_proj_w), params_.data(p.fc_proj_b), N,
                    4 * C, C);
  be.add(a.res2, a.res1, scratchC_, static_cast<size_t>(N) * C);
}

// dres holds d(block output) on entry and d(block input) on exit.
void Gpt::block_backward(int l, const float* x, float* dres) {
  const BlockParams& p = blocks_[static_cast<size_t>(l)];
  const BlockActs& a = acts_[static_cast<size_t>(l)];
  const int N = B_ * T_, C = config_.d_model, NH = config_.n_head;
  const size_t NC = static_cast<size_t>(N) * C;
  auto& be = backend_;
  // MLP branch.
  be.linear_backward(d4C_a_, params_.grad(p.fc_proj_w), params_.grad(p.fc_proj_b), dres, a.gelu,
                     params_.data(p.fc_proj_w), N, 4 * C, C);
  be.gelu_backward(d4C_b_, a.fc, d4C_a_, static_cast<size_t>(N) * 4 * C);
  be.linear_backward(dC_, params_.grad(p.fc_w), params_.grad(p.fc_b), d4C_b_, a.ln2,
                     params_.data(p.fc_w), N, C, 4 * C);
  be.layernorm_backward(dC2_, params_.grad(p.ln2_w), params_.grad(p.ln2_b), dC_, a.res1,
                        params_.data(p.ln2_w), a.ln2_mean, a.ln2_rstd, N, C);
  grad_ready(2 * (config_.n_layer - 1 - l));  // the MLP half is final
  be.add_inplace(dres, dC2_, NC);
  // Attention branch.
  be.linear_backward(dC_, params_.grad(p.attn_proj_w), params_.grad(p.attn_proj_b), dres, a.att,
                     params_.data(p.attn_proj_w), N, C, C);
  be.attention_backward(dqkv_, dC_, a.qkv, a.att, a.lse, B_, T_, C, NH);
  be.linear_backward(dC_, params_.grad(p.attn_w), params_.grad(p.attn_b), dqkv_, a.ln1,
                     params_.data(p.attn_w), N, C, 3 * C);
  be.layernorm_backward(dC2_, params_.grad(p.ln1_w), params_.grad(p.ln1_b), dC_, x,
                        params_.data(p.ln1_w), a.ln1_mean, a.ln1_rstd, N, C);
  grad_ready(2 * (config_.n_layer - 1 - l) + 1);  // the attention half is final
  be.add_inplace(dres, dC2_, NC);
}

double Gpt::forward(const int32_t* tokens, const int32_t* targets, bool backward, float grad_scale,
                    int64_t* count) {
  const int N = B_ * T_, C = config_.d_model, V = config_.vocab_size, L = config_.n_layer;
  auto& be = backend_;
  be.embedding_forward(encoded_, tokens, params_.data(wte_), params_.data(wpe_), B_, T_, C);
  for (int l = 0; l < L; ++l) {
    block_forward(l, l == 0 ? encoded_ : acts_[static_cast<size_t>(l) - 1].res2);
  }
  const float* top = acts_.back().res2;
  be.layernorm_forward(lnf_, lnf_mean_, lnf_rstd_, top, params_.data(lnf_w_), params_.data(lnf_b_),
                       N, C);
  // The fused head writes d(ln_f output) into dC_ and accumulates the tied embedding's
  // gradient, without ever materialising [N, V] logits.
  be.lm_head_cross_entropy(losses_, backward ? dC_ : nullptr,
                           backward ? params_.grad(wte_) : nullptr, lnf_, params_.data(wte_),
                           targets, N, C, V, grad_scale);
  double sum = 0.0;
  int64_t n = 0;
  for (int i = 0; i < N; ++i) {
    if (targets[i] >= 0) {
      sum += losses_[i];
      ++n;
    }
  }
  *count = n;
  if (!backward) return sum;

  be.layernorm_backward(dres_, params_.grad(lnf_w_), params_.grad(lnf_b_), dC_, top,
                        params_.data(lnf_w_), lnf_mean_, lnf_rstd_, N, C);
  for (int l = L - 1; l >= 0; --l) {
    block_backward(l, l == 0 ? encoded_ : acts_[static_cast<size_t>(l) - 1].res2, dres_);
  }
  be.embedding_backward(params_.grad(wte_), params_.grad(wpe_), dres_, tokens, B_, T_, C);
  grad_ready(2 * L);  // the embeddings
  return sum;
}

double Gpt::forward_backward(const int32_t* tokens, const int32_t* targets, float grad_scale,
                             int64_t* count) {
  return forward(tokens, targets, true, grad_scale, count);
}

double Gpt::forward_loss(const int32_t* tokens, const int32_t* targets, int64_t* count) {
  return forward(tokens, targets, false, 0.0f, count);
}

}  // namespace trainctl::model
