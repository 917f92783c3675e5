// Activation recomputation (model/gpt.h, Recompute): the same gradients to the bit, less
// memory, and gpt_memory_floats (the plan's model of the buffers) equal to what the model
// really allocates.
#include <catch2/catch.hpp>
#include <cstring>
#include <vector>

#include "model/gpt.h"
#include "util/random.h"

using namespace trainctl;

namespace {

// GPT, or Llama with grouped-query attention (4 heads sharing 2 k/v heads) and SwiGLU.
model::ModelConfig small(model::Family family = model::Family::gpt) {
  model::ModelConfig c;
  c.vocab_size = 19;
  c.max_seq_len = 8;
  c.n_layer = 4;
  c.n_head = 2;
  c.d_model = 16;
  if (family == model::Family::llama) {
    c.family = family;
    c.n_head = 4;
    c.n_kv_head = 2;
    c.ffn_hidden = 24;
    c.tie_embeddings = false;
  }
  return c;
}

constexpr int kB = 2, kT = 8;  // 16 tokens: every buffer a multiple of 64 bytes, no padding

struct Step {
  double loss = 0;
  std::vector<float> grads;
};

Step one_step(model::Recompute mode, model::Family family) {
  auto be = ops::make_cpu_backend({});
  model::GptOptions options;
  options.recompute = mode;
  model::Gpt gpt(small(family), *be, kB, kT, options);
  gpt.init_weights(5);
  std::vector<int32_t> x(kB * kT), y(kB * kT);
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = static_cast<int32_t>(rng::hash(7, i) % 19);
    y[i] = static_cast<int32_t>(rng::hash(8, i) % 19);
  }
  Step s;
  int64_t n = 0;
  // Two micro-batches: the second backward reads buffers the first one's recompute refilled.
  s.loss = gpt.forward_backward(x.data(), y.data(), 0.5f, &n);
  s.loss += gpt.forward_backward(y.data(), x.data(), 0.5f, &n);
  const float* g = gpt.params().grads();
  s.grads.assign(g, g + gpt.params().total());
  return s;
}

size_t measured_bytes(const model::ModelConfig& c, const model::GptOptions& options) {
  auto be = ops::make_cpu_backend({});
  model::Gpt gpt(c, *be, kB, kT, options);
  return be->peak_allocated_bytes();
}

size_t modelled_bytes(const model::ModelConfig& c, const model::GptOptions& options) {
  const model::GptMemoryFloats m = model::gpt_memory_floats(c, options, kB, kT);
  return static_cast<size_t>(2 * m.params + m.activations + m.recompute + m.workspace) *
         sizeof(float);
}

}  // namespace

TEST_CASE("recomputation gives the gradients of the full forward, bit for bit", "[model]") {
  const model::Family family = GENERATE(model::Family::gpt, model::Family::llama);
  const Step none = one_step(model::Recompute::none, family);
  for (model::Recompute mode : {model::Recompute::selective, model::Recompute::full}) {
    INFO(model::to_string(family) << " " << model::to_string(mode));
    const Step s = one_step(mode, family);
    CHECK(s.loss == none.loss);
    REQUIRE(s.grads.size() == none.grads.size());
    CHECK(std::memcmp(s.grads.data(), none.grads.data(), s.grads.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("gpt_memory_floats is what the model allocates, and recomputation keeps less",
          "[model][memory]") {
  const model::ModelConfig c = small(GENERATE(model::Family::gpt, model::Family::llama));
  struct Case {
    const char* name;
    model::GptShardSpec shard;
    int slots;
  };
  const std::vector<Case> cases = {
      {"whole", {}, 1},
      {"pp 2 stage 0, 2 slots", model::GptShardSpec::of(c, kT, 2, 0, 1, 1, 0), 2},
      {"pp 2 stage 1", model::GptShardSpec::of(c, kT, 2, 1, 1, 1, 0), 1},
      {"interleaved stage 1", model::GptShardSpec::of(c, kT, 2, 1, 2, 1, 0), 3}};
  for (const Case& k : cases) {
    size_t previous = 0;
    for (model::Recompute mode :
         {model::Recompute::none, model::Recompute::selective, model::Recompute::full}) {
      INFO(k.name << ", " << model::to_string(mode));
      model::GptOptions options;
      options.shard = k.shard;
      options.slots = k.slots;
      options.recompute = mode;
      INFO(model::to_string(c.family));
      const size_t bytes = measured_bytes(c, options);
      CHECK(bytes == modelled_bytes(c, options));
      const model::GptMemoryFloats m = model::gpt_memory_floats(c, options, kB, kT);
      CHECK((mode == model::Recompute::none) == (m.recompute == 0));
      if (previous > 0) CHECK(bytes < previous);
      previous = bytes;
    }
  }
  CHECK(model::parse_recompute("selective") == model::Recompute::selective);
  CHECK_THROWS_AS(model::parse_recompute("partial"), std::invalid_argument);
}
