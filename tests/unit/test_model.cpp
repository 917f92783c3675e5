#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "data/sampler.h"
#include "data/synthetic.h"
#include "model/gpt.h"
#include "optim/optimizer.h"
#include "util/random.h"

using namespace trainctl;

namespace {
model::ModelConfig tiny() {
  model::ModelConfig c;
  c.vocab_size = 19;
  c.max_seq_len = 8;
  c.n_layer = 2;
  c.n_head = 2;
  c.d_model = 16;
  return c;
}

void batch(std::vector<int32_t>& x, std::vector<int32_t>& y, int B, int T, int V, uint64_t seed) {
  x.resize(static_cast<size_t>(B * T));
  y.resize(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = static_cast<int32_t>(rng::hash(seed, i) % static_cast<uint64_t>(V));
    y[i] = static_cast<int32_t>(rng::hash(seed + 1, i) % static_cast<uint64_t>(V));
  }
}
}  // namespace

TEST_CASE("GPT parameters: nanoGPT names, shapes and count", "[model]") {
  auto be = ops::make_cpu_backend({});
  model::Gpt gpt(tiny(), *be, 2, 8);
  const auto& p = gpt.params();
  CHECK(p.list().size() == 2 + 2 * 12 + 2);
  CHECK(p.find("transformer.wte.weight").shape == Shape{19, 16});
  CHECK(p.find("transformer.wpe.weight").shape == Shape{8, 16});
  CHECK(p.find("transformer.h.1.attn.c_attn.weight").shape == Shape{48, 16});
  CHECK(p.find("transformer.h.0.mlp.c_proj.weight").shape == Shape{16, 64});
  CHECK_FALSE(p.find("transformer.h.0.ln_1.bias").weight_decay);
  CHECK(p.find("transformer.h.0.mlp.c_fc.weight").weight_decay);
  int64_t n = 0;
  for (const auto& q : p.list()) n += q.numel;
  CHECK(n == tiny().num_params());
  // Gradient pieces, in backward order, tile the flat buffer from its end to its start:
  // block 1's MLP matrices (with ln_f), ln_2, attention matrices, ln_1; block 0's four;
  // the embeddings.
  const auto pieces = gpt.grad_pieces();
  REQUIRE(pieces.size() == 2 * 4 + 1);
  CHECK(pieces.front().second == p.total());
  CHECK(pieces[0].first == p.find("transformer.h.1.mlp.c_fc.weight").offset);
  CHECK(pieces[1].first == p.find("transformer.h.1.ln_2.weight").offset);
  CHECK(pieces[2].first == p.find("transformer.h.1.attn.c_attn.weight").offset);
  CHECK(pieces[3].first == p.find("transformer.h.1.ln_1.weight").offset);
  for (size_t i = 1; i < pieces.size(); ++i) CHECK(pieces[i].second == pieces[i - 1].first);
  CHECK(pieces.back().first == 0);
}

TEST_CASE("GPT init is GPT-2's and a pure function of the seed", "[model]") {
  auto be = ops::make_cpu_backend({});
  model::Gpt a(tiny(), *be, 1, 8), b(tiny(), *be, 2, 8);
  a.init_weights(5);
  b.init_weights(5);
  for (int64_t i = 0; i < a.params().total(); ++i)
    REQUIRE(a.params().data()[i] == b.params().data()[i]);
  const auto& ln = a.params().find("transformer.h.0.ln_1.weight");
  CHECK(a.params().data()[ln.offset] == 1.0f);
  // Residual projections use std 0.02/sqrt(2*n_layer); others 0.02.
  auto stddev = [&](const std::string& name) {
    const auto& q = a.params().find(name);
    double s = 0;
    for (int64_t i = 0; i < q.numel; ++i)
      s += a.params().data()[q.offset + i] * a.params().data()[q.offset + i];
    return std::sqrt(s / static_cast<double>(q.numel));
  };
  CHECK(stddev("transformer.h.0.mlp.c_fc.weight") == Approx(0.02).epsilon(0.1));
  CHECK(stddev("transformer.h.0.mlp.c_proj.weight") == Approx(0.01).epsilon(0.1));
  b.init_weights(6);
  CHECK(a.params().data()[0] != b.params().data()[0]);
}

TEST_CASE("GPT backward matches a finite-difference directional derivative", "[model]") {
  auto be = ops::make_cpu_backend({});
  const int B = 2, T = 8;
  model::Gpt gpt(tiny(), *be, B, T);
  gpt.init_weights(3);
  // Larger weights than GPT-2's init so every path carries signal.
  auto& p = gpt.params();
  for (int64_t i = 0; i < p.total(); ++i) p.data()[i] *= 4.0f;
  std::vector<int32_t> x, y;
  batch(x, y, B, T, 19, 11);
  y[3] = -1;  // an ignored target
  p.zero_grads();
  int64_t n = 0;
  const float scale = 1.0f / static_cast<float>(B * T - 1);
  gpt.forward_backward(x.data(), y.data(), scale, &n);
  CHECK(n == B * T - 1);
  std::vector<float> w0(p.data(), p.data() + p.total()), d(w0.size());
  double gd = 0.0;
  for (size_t i = 0; i < d.size(); ++i) {
    d[i] = static_cast<float>(rng::normal(99, i));
    gd += static_cast<double>(d[i]) * p.grads()[i];
  }
  auto loss_at = [&](double eps) {
    for (size_t i = 0; i < d.size(); ++i) p.data()[i] = w0[i] + static_cast<float>(eps) * d[i];
    int64_t c = 0;
    return gpt.forward_loss(x.data(), y.data(), &c) / static_cast<double>(c);
  };
  const double eps = 1e-4;
  const double fd = (loss_at(eps) - loss_at(-eps)) / (2 * eps);
  INFO("analytic " << gd << " finite difference " << fd);
  CHECK(std::abs(gd) > 1e-2);
  CHECK(fd == Approx(gd).epsilon(2e-3));
}

TEST_CASE("GPT learns the synthetic Markov chain and results do not depend on threads", "[model]") {
  data::DatasetOptions o;
  o.vocab_size = 32;
  o.seq_len = 16;
  o.seed = 1;
  data::SyntheticDataset ds(o);
  model::ModelConfig c;
  c.vocab_size = 32;
  c.max_seq_len = 16;
  c.n_layer = 1;
  c.n_head = 2;
  c.d_model = 32;
  auto train = [&](int threads) {
    auto be = ops::make_cpu_backend({.threads = threads});
    model::Gpt gpt(c, *be, 8, 16);
    gpt.init_weights(1);
    auto opt = optim::make_optimizer({}, gpt.params(), *be);
    data::BatchLayout l{8, 16, 1, 1, 0};
    std::vector<double> losses;
    for (int s = 0; s < 60; ++s) {
      data::StepBatch b;
      data::fill_step_batch(ds, l, s, b);
      gpt.params().zero_grads();
      int64_t n = 0;
      losses.push_back(gpt.forward_backward(b.tokens.data(), b.targets.data(), 1.0f / 128, &n) /
                       128);
      opt->step(1e-2);
    }
    return losses;
  };
  const auto one = train(1), two = train(2);
  CHECK(one.front() == Approx(std::log(32.0)).epsilon(0.05));
  CHECK(one.back() < one.front() - 1.0);
  for (size_t i = 0; i < one.size(); ++i) CHECK(two[i] == Approx(one[i]).epsilon(1e-4));
}

namespace {
// 4 query heads on 2 k/v heads of 4 dims, SwiGLU width 24, untied head.
model::ModelConfig tiny_llama(bool tied = false) {
  model::ModelConfig c = tiny();
  c.family = model::Family::llama;
  c.n_head = 4;
  c.n_kv_head = 2;
  c.ffn_hidden = 24;
  c.tie_embeddings = tied;
  return c;
}
}  // namespace

TEST_CASE("Llama parameters: Hugging Face names, shapes, count and gradient pieces", "[model]") {
  auto be = ops::make_cpu_backend({});
  model::Gpt gpt(tiny_llama(), *be, 2, 8);
  const auto& p = gpt.params();
  CHECK(p.list().size() == 1 + 2 * 9 + 2);
  CHECK(p.find("model.embed_tokens.weight").shape == Shape{19, 16});
  CHECK(p.find("model.layers.1.self_attn.q_proj.weight").shape == Shape{16, 16});
  CHECK(p.find("model.layers.1.self_attn.k_proj.weight").shape == Shape{8, 16});
  CHECK(p.find("model.layers.1.self_attn.v_proj.weight").shape == Shape{8, 16});
  CHECK(p.find("model.layers.0.self_attn.o_proj.weight").shape == Shape{16, 16});
  CHECK(p.find("model.layers.0.mlp.gate_proj.weight").shape == Shape{24, 16});
  CHECK(p.find("model.layers.0.mlp.down_proj.weight").shape == Shape{16, 24});
  CHECK(p.find("lm_head.weight").shape == Shape{19, 16});
  CHECK_FALSE(p.find("model.layers.0.input_layernorm.weight").weight_decay);
  CHECK(p.find("model.layers.0.mlp.up_proj.weight").weight_decay);
  int64_t n = 0;
  for (const auto& q : p.list()) n += q.numel;
  CHECK(n == tiny_llama().num_params());
  CHECK(gpt.tied_embedding_param() == -1);
  const auto pieces = gpt.grad_pieces();
  REQUIRE(pieces.size() == 2 * 4 + 1);
  CHECK(pieces[0].first == p.find("model.layers.1.mlp.gate_proj.weight").offset);
  CHECK(pieces[1].first == p.find("model.layers.1.post_attention_layernorm.weight").offset);
  CHECK(pieces[2].first == p.find("model.layers.1.self_attn.q_proj.weight").offset);
  CHECK(pieces[3].first == p.find("model.layers.1.input_layernorm.weight").offset);
  for (size_t i = 1; i < pieces.size(); ++i) CHECK(pieces[i].second == pieces[i - 1].first);
  CHECK(pieces.back().first == 0);
  // Tied: no lm_head, one parameter fewer, the head reads the embedding.
  model::Gpt tied(tiny_llama(true), *be, 2, 8);
  CHECK(tied.params().list().size() == p.list().size() - 1);
  CHECK(tied.head_weight() == tied.tied_embedding_param());
}

TEST_CASE("Llama backward matches a finite-difference directional derivative", "[model]") {
  auto be = ops::make_cpu_backend({});
  const int B = 2, T = 8;
  const bool tied = GENERATE(false, true);
  model::Gpt gpt(tiny_llama(tied), *be, B, T);
  gpt.init_weights(3);
  auto& p = gpt.params();
  for (int64_t i = 0; i < p.total(); ++i) p.data()[i] *= 4.0f;
  std::vector<int32_t> x, y;
  batch(x, y, B, T, 19, 13);
  y[5] = -1;
  p.zero_grads();
  int64_t n = 0;
  gpt.forward_backward(x.data(), y.data(), 1.0f / static_cast<float>(B * T - 1), &n);
  std::vector<float> w0(p.data(), p.data() + p.total()), d(w0.size());
  double gd = 0.0;
  for (size_t i = 0; i < d.size(); ++i) {
    d[i] = static_cast<float>(rng::normal(98, i));
    gd += static_cast<double>(d[i]) * p.grads()[i];
  }
  auto loss_at = [&](double eps) {
    for (size_t i = 0; i < d.size(); ++i) p.data()[i] = w0[i] + static_cast<float>(eps) * d[i];
    int64_t c = 0;
    return gpt.forward_loss(x.data(), y.data(), &c) / static_cast<double>(c);
  };
  const double eps = 1e-4;
  const double fd = (loss_at(eps) - loss_at(-eps)) / (2 * eps);
  INFO("tied " << tied << " analytic " << gd << " finite difference " << fd);
  CHECK(std::abs(gd) > 1e-2);
  CHECK(fd == Approx(gd).epsilon(2e-3));
}
