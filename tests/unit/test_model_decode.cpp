// The key/value-cache decoder (model/gpt_decode.h) against a full forward without the
// cache, and the sampler (model/token_sampling.h): greedy = argmax, a seed fixes the tokens.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include "model/gpt.h"
#include "model/gpt_decode.h"
#include "model/token_sampling.h"

using namespace trainctl;

namespace {

model::ModelConfig tiny_config(model::Family family = model::Family::gpt) {
  model::ModelConfig c;
  c.vocab_size = 37;
  c.max_seq_len = 16;
  c.n_layer = 2;
  c.n_head = 2;
  c.d_model = 16;
  if (family == model::Family::llama) {
    // Grouped-query attention (4 query heads on 2 k/v heads), SwiGLU, untied head.
    c.family = family;
    c.n_head = 4;
    c.n_kv_head = 2;
    c.ffn_hidden = 24;
    c.tie_embeddings = false;
    c.rope_theta = 500000.0f;
  }
  return c;
}

// A decoder holding a GPT-2-initialised model (the training model's own initialisation), with
// non-zero biases and LayerNorm parameters so every parameter takes part.
model::GptDecoder make_decoder(ops::Backend& be, const model::ModelConfig& c) {
  model::Gpt gpt(c, be, 1, c.max_seq_len);
  gpt.init_weights(7);
  std::mt19937 rng(3);
  std::normal_distribution<float> noise(0.0f, 0.05f);
  auto load = [&](const std::string& name, float* out, size_t numel) {
    const model::Param& p = gpt.params().find(name);
    REQUIRE(static_cast<size_t>(p.numel) == numel);
    const float* src = gpt.params().data() + p.offset;
    for (size_t i = 0; i < numel; ++i)
      out[i] = src[i] + (name.find("wte") == std::string::npos ? noise(rng) : 0.0f);
  };
  return model::GptDecoder(c, be, load);
}

double max_rel_error(const float* a, const float* b, size_t n) {
  double scale = 0.0, err = 0.0;
  for (size_t i = 0; i < n; ++i) {
    scale = std::max(scale, std::abs(double{b[i]}));
    err = std::max(err, std::abs(double{a[i]} - double{b[i]}));
  }
  return err / scale;
}

}  // namespace

TEST_CASE("KV-cache decoding gives the logits of a full forward at every position", "[model]") {
  auto be = ops::make_cpu_backend({});
  const model::ModelConfig c = tiny_config(GENERATE(model::Family::gpt, model::Family::llama));
  INFO(model::to_string(c.family));
  model::GptDecoder dec = make_decoder(*be, c);
  const std::vector<int32_t> tokens = {3, 36, 0, 17, 17, 5, 9, 21, 30, 1, 2, 4, 8, 16, 32, 11};
  const std::vector<float> full = dec.forward_full(tokens);
  for (size_t t = 0; t < tokens.size(); ++t) {
    const std::vector<float>& step = dec.step(tokens[t]);
    INFO("position " << t);
    CHECK(max_rel_error(step.data(), full.data() + t * c.vocab_size, c.vocab_size) < 1e-5);
  }
  CHECK(dec.position() == c.max_seq_len);
  CHECK_THROWS_AS(dec.step(1), std::out_of_range);  // cache full
  dec.reset();
  CHECK_THROWS_AS(dec.step(37), std::out_of_range);  // outside the vocabulary
}

TEST_CASE("greedy sampling picks the argmax of the full forward at each position", "[model]") {
  auto be = ops::make_cpu_backend({});
  const model::ModelConfig c = tiny_config();
  model::GptDecoder dec = make_decoder(*be, c);
  const std::vector<int32_t> prompt = {5, 6, 7};
  const std::vector<int32_t> out = model::generate(dec, prompt, 10, {0.0f, 0, 1});
  REQUIRE(out.size() == 10);
  std::vector<int32_t> seq = prompt;
  for (int32_t token : out) {
    const std::vector<float> full = dec.forward_full(seq);
    const std::vector<float> last(full.end() - c.vocab_size, full.end());
    CHECK(token == model::argmax(last));
    seq.push_back(token);
  }
  // Past max_seq_len the context is cropped and decoding goes on.
  CHECK(model::generate(dec, prompt, 40, {0.0f, 0, 1}).size() == 40);
}

TEST_CASE("a seed fixes the sampled tokens and top-k keeps to the k most likely", "[model]") {
  auto be = ops::make_cpu_backend({});
  const model::ModelConfig c = tiny_config();
  model::GptDecoder dec = make_decoder(*be, c);
  const std::vector<int32_t> prompt = {1};
  const model::SampleOptions a{1.5f, 0, 42}, b{1.5f, 0, 43};
  const auto first = model::generate(dec, prompt, 12, a);
  CHECK(model::generate(dec, prompt, 12, a) == first);
  CHECK(model::generate(dec, prompt, 12, b) != first);

  std::vector<float> logits(10, 0.0f);
  logits[3] = 5.0f;
  logits[7] = 4.0f;
  std::mt19937_64 rng(1);
  for (int i = 0; i < 200; ++i) {
    const int32_t t = model::sample_token(logits, {100.0f, 2, 0}, rng);
    CHECK((t == 3 || t == 7));
  }
  CHECK(model::sample_token(logits, {0.0f, 0, 0}, rng) == 3);
}

TEST_CASE("the decoder's full forward has the training model's loss, for both families",
          "[model]") {
  auto be = ops::make_cpu_backend({});
  const model::ModelConfig c = tiny_config(GENERATE(model::Family::gpt, model::Family::llama));
  INFO(model::to_string(c.family));
  model::Gpt gpt(c, *be, 1, c.max_seq_len);
  gpt.init_weights(9);
  model::GptDecoder dec(c, *be, [&](const std::string& name, float* out, size_t numel) {
    const model::Param& p = gpt.params().find(name);
    REQUIRE(static_cast<size_t>(p.numel) == numel);
    std::copy_n(gpt.params().data() + p.offset, numel, out);
  });
  std::vector<int32_t> tokens(static_cast<size_t>(c.max_seq_len)), targets(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = static_cast<int32_t>((i * 7 + 3) % 37);
    targets[i] = static_cast<int32_t>((i * 5 + 1) % 37);
  }
  int64_t count = 0;
  const double want = gpt.forward_loss(tokens.data(), targets.data(), &count);
  const std::vector<float> logits = dec.forward_full(tokens);
  double got = 0.0;
  for (size_t t = 0; t < tokens.size(); ++t) {
    const float* row = logits.data() + t * c.vocab_size;
    double mx = row[0], sum = 0.0;
    for (int v = 0; v < c.vocab_size; ++v) mx = std::max(mx, double{row[v]});
    for (int v = 0; v < c.vocab_size; ++v) sum += std::exp(row[v] - mx);
    got += mx + std::log(sum) - row[targets[t]];
  }
  CHECK(count == c.max_seq_len);
  CHECK(got == Approx(want).epsilon(1e-5));
}
