// Activation recomputation (model/gpt.h, Recompute): the same gradients to the bit, less
// memory, and gpt_memory_floats (the plan's model of the buffers) equal to what the model
// really allocates; in fp32 and with the activations kept in 16 bits
// (GptOptions::kept_activations, model/activation_arena.h).
#include <catch2/catch.hpp>
#include <cstring>
#include <set>
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

void fill_tokens(std::vector<int32_t>& x, std::vector<int32_t>& y) {
  x.resize(kB * kT);
  y.resize(kB * kT);
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = static_cast<int32_t>(rng::hash(7, i) % 19);
    y[i] = static_cast<int32_t>(rng::hash(8, i) % 19);
  }
}

// A backend whose products round to `kept`, and a model keeping its activations in it.
std::unique_ptr<ops::Backend> backend_for(DType kept) {
  ops::BackendOptions o;
  o.matmul = kept;
  return ops::make_cpu_backend(o);
}

Step one_step(model::Recompute mode, model::Family family, DType kept = DType::fp32) {
  auto be = backend_for(kept);
  model::GptOptions options;
  options.recompute = mode;
  options.kept_activations = kept;
  model::Gpt gpt(small(family), *be, kB, kT, options);
  gpt.init_weights(5);
  std::vector<int32_t> x, y;
  fill_tokens(x, y);
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
  auto be = backend_for(options.kept_activations);
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
  // 16-bit kept activations: every producer rounds what it writes, kept or recomputed, so
  // the modes still agree to the bit (and the stores hold the values exactly).
  const DType kept = GENERATE(DType::fp32, DType::bf16, DType::fp16);
  const Step none = one_step(model::Recompute::none, family, kept);
  for (model::Recompute mode : {model::Recompute::selective, model::Recompute::full}) {
    INFO(model::to_string(family) << " " << model::to_string(mode) << " " << dtype_name(kept));
    const Step s = one_step(mode, family, kept);
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
  const DType kept = GENERATE(DType::fp32, DType::bf16);
  for (const Case& k : cases) {
    size_t previous = 0;
    for (model::Recompute mode :
         {model::Recompute::none, model::Recompute::selective, model::Recompute::full}) {
      INFO(k.name << ", " << model::to_string(mode) << ", kept " << dtype_name(kept));
      model::GptOptions options;
      options.shard = k.shard;
      options.slots = k.slots;
      options.recompute = mode;
      options.kept_activations = kept;
      INFO(model::to_string(c.family));
      const size_t bytes = measured_bytes(c, options);
      CHECK(bytes == modelled_bytes(c, options));
      const model::GptMemoryFloats m = model::gpt_memory_floats(c, options, kB, kT);
      CHECK((mode == model::Recompute::none) == (m.recompute == 0));
      if (previous > 0) CHECK(bytes < previous);
      previous = bytes;
      if (kept == DType::fp32) continue;
      // Each (block, slot) keeps its 16-bit stores, half the floats of the fp32 buffers it
      // would have kept: its kept activations, its output (but the last block of a chunk
      // without the head, whose output leaves the stage from a working buffer, in both);
      // each (chunk, slot) its input. The model holds one fp32 working set of the kept
      // activations, the outputs' working buffers (one per parity of the block index: block
      // b reads b-1's while writing its own; in fp32 only the leaving blocks' parities), and
      // one of the inputs (workspace).
      options.kept_activations = DType::fp32;
      const model::GptMemoryFloats wide = model::gpt_memory_floats(c, options, kB, kT);
      std::vector<model::LayerRange> chunks = k.shard.chunks;
      if (chunks.empty()) chunks.push_back({0, c.n_layer});
      const bool head = k.shard.chunks.empty() || k.shard.head;
      int blocks = 0, leaving = 0;
      std::set<int> leaving_parities;
      for (size_t i = 0; i < chunks.size(); ++i) {
        blocks += chunks[i].size();
        if (i + 1 < chunks.size() || !head) {
          ++leaving;
          leaving_parities.insert((blocks - 1) % 2);
        }
      }
      const auto nchunks = static_cast<int64_t>(chunks.size());
      const int64_t row = int64_t{kB} * kT * c.d_model;  // one [N, C] of the residual stream
      const auto parities = static_cast<int64_t>(std::min(blocks, 2) - leaving_parities.size());
      const int64_t working = m.workspace - wide.workspace - (parities + 1) * row;
      CHECK(working >= 0);
      CHECK((working == 0) == (mode == model::Recompute::full));
      CHECK(2 * (wide.activations - m.activations) ==
            int64_t{blocks} * k.slots * working + int64_t{blocks - leaving} * k.slots * row +
                nchunks * k.slots * row);
    }
  }
  CHECK(model::parse_recompute("selective") == model::Recompute::selective);
  CHECK_THROWS_AS(model::parse_recompute("partial"), std::invalid_argument);
}

TEST_CASE("16-bit kept activations: a micro-batch in flight keeps its own, in its store",
          "[model][memory]") {
  // Two micro-batches forward before either backward (a pipeline's warm-up): they share
  // every block's fp32 working set, so the first backward reads its activations only from
  // its 16-bit store. The gradients must be bitwise those of running the two in turn (the
  // same accumulation order: micro-batch 0's backward first). GPT's embedding is tied, and
  // the head adds its share of that gradient during forward, in another order: it is
  // compared within rounding, every other gradient to the bit.
  const model::Family family = GENERATE(model::Family::gpt, model::Family::llama);
  const model::Recompute mode = GENERATE(model::Recompute::none, model::Recompute::selective);
  INFO(model::to_string(family) << " " << model::to_string(mode));
  std::vector<int32_t> x, y;
  fill_tokens(x, y);
  std::pair<size_t, size_t> tied;  // the tied embedding's gradient floats
  auto run = [&](bool in_flight) {
    auto be = backend_for(DType::bf16);
    model::GptOptions options;
    options.slots = 2;
    options.recompute = mode;
    options.kept_activations = DType::bf16;
    model::Gpt gpt(small(family), *be, kB, kT, options);
    gpt.init_weights(5);
    model::ChunkLoss loss;
    const int32_t* in[2] = {x.data(), y.data()};
    const int32_t* out[2] = {y.data(), x.data()};
    if (in_flight) {
      for (int s = 0; s < 2; ++s) gpt.forward_chunk(0, s, in[s], out[s], true, 0.5f, &loss);
      for (int s = 0; s < 2; ++s) gpt.backward_chunk(0, s, in[s], true);
    } else {
      for (int s = 0; s < 2; ++s) {
        gpt.forward_chunk(0, s, in[s], out[s], true, 0.5f, &loss);
        gpt.backward_chunk(0, s, in[s], true);
      }
    }
    const float* g = gpt.params().grads();
    std::vector<float> grads(g, g + gpt.params().total());
    tied = {0, 0};
    if (const int t = gpt.tied_embedding_param(); t >= 0) {
      const model::Param& p = gpt.params().at(static_cast<size_t>(t));
      tied = {static_cast<size_t>(p.offset), static_cast<size_t>(p.offset + p.numel)};
    }
    return grads;
  };
  const std::vector<float> in_turn = run(false), in_flight = run(true);
  REQUIRE(in_turn.size() == in_flight.size());
  size_t different = 0;
  for (size_t i = 0; i < in_turn.size(); ++i) {
    if (i >= tied.first && i < tied.second) {
      CHECK(in_flight[i] == Approx(in_turn[i]).margin(1e-6));
    } else if (in_turn[i] != in_flight[i]) {
      ++different;
    }
  }
  CHECK(different == 0);
}
