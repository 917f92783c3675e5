// Model shards (tensor- and pipeline-parallel pieces of the GPT) against the whole model:
// initial values are slices of the whole model's, and TP ranks (threads over Gloo) or
// pipeline stages (chained by hand) give the whole model's loss and gradients.
#include <catch2/catch.hpp>

#include <cmath>
#include <mutex>
#include <vector>

#include "model/gpt.h"
#include "model/shard.h"
#include "test_parallel_support.h"

namespace model = trainctl::model;
namespace ops = trainctl::ops;
namespace comm = trainctl::comm;

namespace {

const model::ModelConfig kCfg{
    .vocab_size = 32, .max_seq_len = 8, .n_layer = 4, .n_head = 4, .d_model = 16};
constexpr int B = 2, T = 8;

struct Batch {
  std::vector<int32_t> tokens, targets;
};

Batch batch() {
  Batch b;
  for (int i = 0; i < B * T; ++i) {
    b.tokens.push_back((i * 7 + 3) % kCfg.vocab_size);
    b.targets.push_back(i == 5 ? -1 : (i * 11 + 1) % kCfg.vocab_size);
  }
  return b;
}

// The slice of a whole-model tensor that `p` holds, in p's local order.
std::vector<float> slice_of(const model::ParameterSet& whole, const model::Param& p, bool grads) {
  const model::Param& full = whole.find(p.name);
  const float* src = (grads ? whole.grads() : whole.data()) + full.offset;
  std::vector<float> out(static_cast<size_t>(p.numel));
  for (int64_t k = 0; k < p.numel; ++k) out[static_cast<size_t>(k)] = src[p.shard.global_index(k)];
  return out;
}

void require_close(const float* got, const std::vector<float>& want, double tol,
                   const std::string& what) {
  double worst = 0, scale = 1e-12;
  for (size_t i = 0; i < want.size(); ++i) {
    worst = std::max(worst, static_cast<double>(std::fabs(got[i] - want[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(want[i])));
  }
  INFO(what << ": worst abs error " << worst << " vs max magnitude " << scale);
  REQUIRE(worst <= tol * scale);
}

}  // namespace

TEST_CASE("TensorShard maps local elements to their global positions", "[model]") {
  // c_attn's rows are q | k | v, each split over 2 ranks: rank 1 holds rows 2-3, 6-7, 10-11
  // of a [12, 5] weight.
  model::TensorShard s{.global_shape = {12, 5}, .dim = 0, .blocks = 3, .index = 1, .count = 2};
  CHECK(s.local_shape() == trainctl::Shape{6, 5});
  CHECK(s.runs() == std::vector<std::pair<int64_t, int64_t>>{{2, 2}, {6, 2}, {10, 2}});
  CHECK(s.global_index(0) == 2 * 5);
  CHECK(s.global_index(2 * 5 + 1) == 6 * 5 + 1);
  // A column split of a [3, 8] weight: rank 1 of 4 holds columns 2-3.
  model::TensorShard c{.global_shape = {3, 8}, .dim = 1, .blocks = 1, .index = 1, .count = 4};
  CHECK(c.local_shape() == trainctl::Shape{3, 2});
  CHECK(c.global_index(3) == 8 + 3);
}

TEST_CASE("pipeline partition balances blocks and the LM head", "[model]") {
  const auto two = model::partition_layers(kCfg, T, 2);
  REQUIRE(two.size() == 2);
  CHECK(two[0] == model::LayerRange{0, 2});
  CHECK(two[1] == model::LayerRange{2, 4});
  // A head as costly as several blocks pushes blocks to the earlier stages.
  model::ModelConfig big_vocab = kCfg;
  big_vocab.vocab_size = 16 * 12 * 16 * 2;  // head = 2 blocks' worth
  big_vocab.n_layer = 6;
  const auto parts = model::partition_layers(big_vocab, T, 2);
  CHECK(parts[0].size() > parts[1].size());
  for (int p = 1; p <= 4; ++p) {
    const auto r = model::partition_layers(kCfg, T, p);
    CHECK(r.front().begin == 0);
    CHECK(r.back().end == kCfg.n_layer);
    for (size_t i = 1; i < r.size(); ++i) CHECK(r[i].begin == r[i - 1].end);
    for (const auto& range : r) CHECK(range.size() >= 1);
  }
  CHECK_THROWS_AS(model::partition_layers(kCfg, T, 5), std::invalid_argument);
}

TEST_CASE("pipeline partition: equal stages and given layer counts (uneven stages)", "[model]") {
  model::ModelConfig six = kCfg;
  six.n_layer = 6;
  six.vocab_size = 16 * 12 * 16 * 2;  // the head costs more than all six blocks
  // stage_balance: equal ignores the head; auto gives its stage fewer blocks.
  const auto equal = model::partition_layers(six, T, 2, {.equal = true, .layers = {}});
  CHECK(equal == std::vector<model::LayerRange>{{0, 3}, {3, 6}});
  const auto balanced = model::partition_layers(six, T, 2);
  CHECK(balanced[1].size() < 3);
  CHECK_THROWS_AS(model::partition_layers(six, T, 4, {.equal = true, .layers = {}}),
                  std::invalid_argument);
  // layers_per_stage: exactly the counts given, in order.
  const auto given = model::partition_layers(six, T, 3, {.layers = {1, 4, 1}});
  CHECK(given == std::vector<model::LayerRange>{{0, 1}, {1, 5}, {5, 6}});
  CHECK_THROWS_AS(model::partition_layers(six, T, 2, {.layers = {1, 4, 1}}),
                  std::invalid_argument);  // wrong length
  CHECK_THROWS_AS(model::partition_layers(six, T, 2, {.layers = {2, 3}}),
                  std::invalid_argument);  // wrong sum
  CHECK_THROWS_AS(model::partition_layers(six, T, 2, {.layers = {0, 6}}),
                  std::invalid_argument);  // an empty stage
  // Interleaved: chunk c of pipeline rank r is entry c * pp + r.
  const model::GptShardSpec r1 =
      model::GptShardSpec::of(six, T, 2, 1, 2, 1, 0, {.layers = {2, 1, 2, 1}});
  CHECK(r1.chunks == std::vector<model::LayerRange>{{2, 3}, {5, 6}});
  CHECK(r1.head);
  CHECK_FALSE(r1.embedding);
}

TEST_CASE("TP shards start as slices of the whole model and reproduce its gradients", "[model]") {
  const int tp = GENERATE(2, 4);
  auto backend = ops::make_cpu_backend({.threads = 1});
  model::Gpt whole(kCfg, *backend, B, T);
  whole.init_weights(5);
  const Batch b = batch();
  int64_t count = 0;
  const float scale = 1.0f / 15;
  const double want = whole.forward_backward(b.tokens.data(), b.targets.data(), scale, &count);
  std::mutex mutex;
  trainctl::parallel::testing::on_dp_group(tp, [&](comm::Communicator& group) {
    auto be = ops::make_cpu_backend({.threads = 1});
    model::GptOptions options;
    options.shard = model::GptShardSpec::of(kCfg, T, 1, 0, 1, tp, group.rank());
    options.tp = &group;
    model::Gpt shard(kCfg, *be, B, T, options);
    shard.init_weights(5);
    int64_t n = 0;
    const double got = shard.forward_backward(b.tokens.data(), b.targets.data(), scale, &n);
    std::lock_guard<std::mutex> lock(mutex);
    REQUIRE(n == count);
    REQUIRE(got == Approx(want).epsilon(1e-5));
    for (const model::Param& p : shard.params().list()) {
      REQUIRE(slice_of(whole.params(), p, false) ==
              std::vector<float>(shard.params().data() + p.offset,
                                 shard.params().data() + p.offset + p.numel));
      require_close(shard.params().grads() + p.offset, slice_of(whole.params(), p, true), 1e-4,
                    p.name);
    }
  });
}

TEST_CASE("pipeline stages chained by hand reproduce the whole model", "[model]") {
  // Equal stages of 2 or 1 blocks, and uneven ones (parallel.layers_per_stage).
  const std::vector<int> counts =
      GENERATE(std::vector<int>{2, 2}, std::vector<int>{1, 1, 1, 1}, std::vector<int>{3, 1},
               std::vector<int>{1, 3}, std::vector<int>{1, 2, 1});
  const int stages = static_cast<int>(counts.size());
  INFO(stages << " stages, the first of " << counts.front() << " blocks");
  auto backend = ops::make_cpu_backend({.threads = 1});
  model::Gpt whole(kCfg, *backend, B, T);
  whole.init_weights(9);
  const Batch b = batch();
  int64_t count = 0;
  const float scale = 1.0f / 15;
  const double want = whole.forward_backward(b.tokens.data(), b.targets.data(), scale, &count);

  std::vector<std::unique_ptr<model::Gpt>> s;
  for (int r = 0; r < stages; ++r) {
    model::GptOptions options;
    options.shard = model::GptShardSpec::of(kCfg, T, stages, r, 1, 1, 0, {.layers = counts});
    REQUIRE(options.shard.chunks.front().size() == counts[static_cast<size_t>(r)]);
    options.slots = 2;
    s.push_back(std::make_unique<model::Gpt>(kCfg, *backend, B, T, options));
    s.back()->init_weights(9);
  }
  const auto n = static_cast<size_t>(s[0]->boundary_floats());
  model::Gpt::ChunkLoss loss;
  const int slot = 1;
  for (int r = 0; r < stages; ++r) {
    const void* out = s[static_cast<size_t>(r)]->forward_chunk(
        0, slot, b.tokens.data(), b.targets.data(), true, scale, &loss);
    if (r + 1 < stages)
      s[static_cast<size_t>(r) + 1]->copy_boundary(
          s[static_cast<size_t>(r) + 1]->input_buffer(0, slot), out);
  }
  CHECK(loss.count == count);
  CHECK(loss.sum == Approx(want).epsilon(1e-6));
  for (int r = stages - 1; r >= 0; --r) {
    const float* d = s[static_cast<size_t>(r)]->backward_chunk(0, slot, b.tokens.data(), true);
    if (r > 0) std::copy(d, d + n, s[static_cast<size_t>(r) - 1]->output_grad_buffer());
  }
  // The tied embedding: the first stage's wte gradient plus the last stage's copy's.
  model::Gpt& first = *s.front();
  model::Gpt& last = *s.back();
  REQUIRE(first.tied_embedding_piece() >= 0);
  REQUIRE(last.tied_embedding_piece() == 0);
  const model::Param& wte = first.params().at(static_cast<size_t>(first.tied_embedding_param()));
  const model::Param& copy = last.params().at(static_cast<size_t>(last.tied_embedding_param()));
  CHECK(copy.tied_copy);
  std::vector<float> sum(static_cast<size_t>(wte.numel));
  for (size_t i = 0; i < sum.size(); ++i) {
    sum[i] = first.params().grads()[wte.offset + static_cast<int64_t>(i)] +
             last.params().grads()[copy.offset + static_cast<int64_t>(i)];
  }
  require_close(sum.data(), slice_of(whole.params(), wte, true), 1e-5, "tied wte");
  for (const auto& stage : s) {
    for (const model::Param& p : stage->params().list()) {
      if (p.name == "transformer.wte.weight") continue;
      require_close(stage->params().grads() + p.offset, slice_of(whole.params(), p, true), 1e-5,
                    p.name);
    }
  }
}
