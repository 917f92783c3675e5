// Sequence parallelism (GptOptions::sequence_parallel, model/model_context.h): two TP ranks
// (threads over one Gloo group) give the losses and gradients of plain tensor parallelism
// for every model family, MoE and recomputation mode; recomputation stays bitwise; the
// residual stream's buffers shrink by tp, and gpt_memory_floats is still what the model
// allocates.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "model/gpt.h"
#include "test_parallel_support.h"
#include "util/random.h"

using namespace trainctl;

namespace {

// 32 tokens, 16 rows per TP rank: every buffer a multiple of 64 bytes (no padding).
constexpr int kTp = 2, kB = 4, kT = 8, kVocab = 20;

enum class Kind { gpt, llama, moe };

model::ModelConfig config_of(Kind kind) {
  model::ModelConfig c;
  c.vocab_size = kVocab;
  c.max_seq_len = kT;
  c.n_layer = 2;
  c.n_head = 2;
  c.d_model = 16;
  if (kind == Kind::llama) {
    c.family = model::Family::llama;
    c.n_head = 4;
    c.n_kv_head = 2;
    c.ffn_hidden = 24;
    c.tie_embeddings = false;
  }
  if (kind == Kind::moe) {
    c.moe.num_experts = 4;
    c.moe.top_k = 2;
    c.moe.expert_ffn_hidden = 12;
    c.moe.aux_loss_coef = 0.5f;
  }
  return c;
}

const char* name_of(Kind k) { return k == Kind::gpt ? "gpt" : k == Kind::llama ? "llama" : "moe"; }

struct RankResult {
  double loss = 0;
  std::vector<float> grads;
};

model::GptOptions options_of(const model::ModelConfig& c, int tp_rank, bool sp,
                             model::Recompute mode) {
  model::GptOptions o;
  o.shard = model::GptShardSpec::of(c, kT, 1, 0, 1, kTp, tp_rank);
  o.recompute = mode;
  o.sequence_parallel = sp;
  return o;
}

// Two micro-batches forward and backward on each TP rank.
std::vector<RankResult> train_step(Kind kind, bool sp, model::Recompute mode) {
  const model::ModelConfig c = config_of(kind);
  std::vector<RankResult> out(kTp);
  parallel::testing::on_dp_group(kTp, [&](comm::Communicator& tp) {
    auto be = ops::make_cpu_backend({});
    model::GptOptions o = options_of(c, tp.rank(), sp, mode);
    o.tp = &tp;
    model::Gpt gpt(c, *be, kB, kT, o);
    gpt.init_weights(3);
    std::vector<int32_t> x(kB * kT), y(kB * kT);
    for (size_t i = 0; i < x.size(); ++i) {
      x[i] = static_cast<int32_t>(rng::hash(7, i) % kVocab);
      y[i] = static_cast<int32_t>(rng::hash(8, i) % kVocab);
    }
    std::vector<int32_t> targets = y;
    targets[3] = -1;  // an ignored target
    RankResult& r = out[static_cast<size_t>(tp.rank())];
    int64_t n = 0;
    r.loss = gpt.forward_backward(x.data(), targets.data(), 0.5f, &n);
    r.loss += gpt.forward_backward(y.data(), x.data(), 0.5f, &n);
    const float* g = gpt.params().grads();
    r.grads.assign(g, g + gpt.params().total());
  });
  return out;
}

}  // namespace

TEST_CASE("sequence parallelism gives tensor parallelism's losses and gradients",
          "[model][sequence_parallel]") {
  const Kind kind = GENERATE(Kind::gpt, Kind::llama, Kind::moe);
  const std::vector<RankResult> tp = train_step(kind, false, model::Recompute::none);
  for (model::Recompute mode :
       {model::Recompute::none, model::Recompute::selective, model::Recompute::full}) {
    INFO(name_of(kind) << " " << model::to_string(mode));
    const std::vector<RankResult> sp = train_step(kind, true, mode);
    for (int r = 0; r < kTp; ++r) {
      const RankResult &a = tp[static_cast<size_t>(r)], &b = sp[static_cast<size_t>(r)];
      INFO("tp rank " << r);
      CHECK(b.loss == Approx(a.loss).epsilon(1e-6));
      REQUIRE(b.grads.size() == a.grads.size());
      // Only the order of fp32 sums differs (the norms' gradients are summed over the rows
      // of both ranks): a few ulps of the largest gradient.
      double scale = 0, worst = 0;
      for (float g : a.grads) scale = std::max(scale, double(std::fabs(g)));
      for (size_t i = 0; i < a.grads.size(); ++i) {
        worst = std::max(worst, double(std::fabs(a.grads[i] - b.grads[i])));
      }
      CHECK(scale > 0);
      CHECK(worst <= 1e-5 * scale);
    }
  }
}

TEST_CASE("recomputation under sequence parallelism is bitwise the full forward's",
          "[model][sequence_parallel][recompute]") {
  const Kind kind = GENERATE(Kind::gpt, Kind::llama);
  const std::vector<RankResult> none = train_step(kind, true, model::Recompute::none);
  for (model::Recompute mode : {model::Recompute::selective, model::Recompute::full}) {
    INFO(name_of(kind) << " " << model::to_string(mode));
    const std::vector<RankResult> s = train_step(kind, true, mode);
    for (int r = 0; r < kTp; ++r) {
      const auto &a = none[static_cast<size_t>(r)], &b = s[static_cast<size_t>(r)];
      CHECK(a.loss == b.loss);
      REQUIRE(a.grads.size() == b.grads.size());
      CHECK(std::memcmp(a.grads.data(), b.grads.data(), a.grads.size() * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("sequence parallelism divides the residual stream's memory by tp, as modelled",
          "[model][sequence_parallel][memory]") {
  const Kind kind = GENERATE(Kind::gpt, Kind::llama);
  const model::ModelConfig c = config_of(kind);
  for (model::Recompute mode :
       {model::Recompute::none, model::Recompute::selective, model::Recompute::full}) {
    INFO(name_of(kind) << " " << model::to_string(mode));
    const model::GptOptions tp = options_of(c, 0, false, mode);
    const model::GptOptions sp = options_of(c, 0, true, mode);
    const auto plain = model::gpt_memory_floats(c, tp, kB, kT);
    const auto split = model::gpt_memory_floats(c, sp, kB, kT);
    // Kept per block: the residual stream after the mixer and the block output ([N,C]
    // each without recomputation; the output only with it), and the norms' statistics;
    // per chunk its input. Each holds N / tp rows under sequence parallelism.
    const int64_t N = kB * kT, C = c.d_model, L = c.n_layer, n = N / kTp;
    const int64_t stats = 4;  // mean and rstd of two norms, per row (RMSNorm's mean unused)
    const int64_t per_row = mode == model::Recompute::none ? 2 * C + stats : C;
    const int64_t head_rows = C + 2;  // the final norm's d(output) and statistics
    CHECK(plain.activations - split.activations == (N - n) * (L * per_row + C + head_rows));
    CHECK(split.params == plain.params);
    // What the model allocates is what gpt_memory_floats counts.
    size_t measured = 0;
    parallel::testing::on_dp_group(kTp, [&](comm::Communicator& group) {
      auto be = ops::make_cpu_backend({});
      model::GptOptions o = options_of(c, group.rank(), true, mode);
      o.tp = &group;
      model::Gpt gpt(c, *be, kB, kT, o);
      if (group.rank() == 0) measured = be->peak_allocated_bytes();
      group.barrier();
    });
    const auto floats = 2 * split.params + split.activations + split.recompute + split.workspace;
    CHECK(measured == static_cast<size_t>(floats) * sizeof(float));
  }
}

TEST_CASE("sequence parallelism refuses a TP group that does not split the sequence",
          "[model][sequence_parallel]") {
  model::ModelConfig c = config_of(Kind::gpt);
  c.n_head = 4;  // tp 4 splits the heads, the MLP and the vocabulary, not seq_len 6
  model::GptOptions o;
  o.sequence_parallel = true;  // tp 1
  CHECK_THROWS_WITH(model::gpt_memory_floats(c, o, kB, kT),
                    Catch::Contains("sequence parallelism needs tp > 1 dividing seq_len"));
  o.shard = model::GptShardSpec::of(c, 6, 1, 0, 1, 4, 0);
  CHECK_THROWS_WITH(model::gpt_memory_floats(c, o, kB, 6), Catch::Contains("(tp 4, seq_len 6)"));
}
