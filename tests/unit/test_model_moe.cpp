// The mixture-of-experts feed-forward (model/moe/): the router's choices, gates and capacity
// policy, a finite-difference check of router + grouped experts (aux loss included), the
// checkpoint names and parameter counts, and recomputation.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "model/gpt.h"
#include "model/gpt_decode.h"
#include "model/moe/moe_ffn.h"
#include "model/moe/router.h"
#include "util/random.h"

using namespace trainctl;

namespace {

model::ModelConfig moe_config(bool llama, model::MoeScore score) {
  model::ModelConfig c;
  c.vocab_size = 19;
  c.max_seq_len = 8;
  c.n_layer = 2;
  c.n_head = 2;
  c.d_model = 16;
  if (llama) {
    c.family = model::Family::llama;
    c.n_kv_head = 1;
    c.ffn_hidden = 24;
    c.tie_embeddings = false;
  }
  c.moe.num_experts = 4;
  c.moe.top_k = 2;
  c.moe.expert_ffn_hidden = 12;
  c.moe.score = score;
  c.moe.aux_loss_coef = 0.5f;
  return c;
}

struct FdResult {
  double analytic = 0, finite_difference = 0;
  bool routing_stable = true;
  std::vector<float> grads;
};

// One MoeFfn on its own: loss = sum(y * r) + aux_scale * aux loss, its gradient against a
// central difference along a random direction through every parameter and the input.
FdResult fd_check(const model::ModelConfig& config, float grad_scale,
                  const std::vector<float>& bias = {}) {
  auto be = ops::make_cpu_backend({});
  model::ModelContext ctx;
  ctx.config = config;
  ctx.shard = model::GptShardSpec::whole(ctx.config);
  ctx.B = 2;
  ctx.T = 4;
  ctx.grad_scale = grad_scale;
  model::ParameterSet params(*be);
  ctx.backend = be.get();
  ctx.params = &params;
  model::ParamList list(ctx.shard);
  model::moe::MoeFfn ffn(ctx, list, "moe");
  if (!bias.empty()) ffn.expert_bias() = bias;
  for (const model::ParamSpec& s : list.specs()) params.declare(s);
  params.allocate();
  params.initialize(4);
  for (int64_t i = 0; i < params.total(); ++i) params.data()[i] *= 8.0f;  // signal everywhere
  model::ActivationArena arena(be.get());
  ffn.allocate(arena, 1);
  const size_t NC = ctx.NC();
  std::vector<float> h0(NC), h(NC), y(NC), dy(NC), dh(NC);
  std::vector<float> w0(params.data(), params.data() + params.total());
  for (size_t i = 0; i < NC; ++i) h0[i] = static_cast<float>(rng::normal(1, i));
  for (size_t i = 0; i < NC; ++i) dy[i] = static_cast<float>(rng::normal(2, i));
  const float aux_scale = grad_scale * static_cast<float>(ctx.T);
  auto loss = [&] {
    ffn.forward(0, h.data(), y.data());
    double s = 0;
    for (size_t i = 0; i < NC; ++i) s += static_cast<double>(y[i]) * dy[i];
    const model::moe::Routing& routing = ffn.routing(0);
    const model::moe::SequenceLoads loads =
        model::moe::sequence_loads(routing, ctx.T, ctx.T, ctx.config.moe);
    return s + aux_scale * model::moe::aux_loss_sum(routing, loads, ctx.config.moe);
  };
  h = h0;
  loss();
  const std::vector<int> chosen = ffn.routing(0).expert;
  ffn.backward(0, h.data(), dy.data(), dh.data(), model::PieceReport());
  FdResult r;
  r.grads.assign(params.grads(), params.grads() + params.total());
  for (size_t i = 0; i < w0.size(); ++i) r.analytic += rng::normal(3, i) * r.grads[i];
  for (size_t i = 0; i < NC; ++i) r.analytic += rng::normal(4, i) * dh[i];
  auto loss_at = [&](double eps) {
    for (size_t i = 0; i < w0.size(); ++i) {
      params.data()[i] = w0[i] + static_cast<float>(eps * rng::normal(3, i));
    }
    for (size_t i = 0; i < NC; ++i) h[i] = h0[i] + static_cast<float>(eps * rng::normal(4, i));
    const double l = loss();
    r.routing_stable = r.routing_stable && ffn.routing(0).expert == chosen;
    return l;
  };
  const double eps = 1e-3;
  r.finite_difference = (loss_at(eps) - loss_at(-eps)) / (2 * eps);
  return r;
}

// Floats the parameters hold (total() also counts alignment padding).
int64_t numel_of(const model::Gpt& gpt) {
  int64_t n = 0;
  for (const auto& q : gpt.params().list()) n += q.numel;
  return n;
}

void batch(std::vector<int32_t>& x, std::vector<int32_t>& y, size_t n, int V, uint64_t seed) {
  x.resize(n);
  y.resize(n);
  for (size_t i = 0; i < n; ++i) {
    x[i] = static_cast<int32_t>(rng::hash(seed, i) % static_cast<uint64_t>(V));
    y[i] = static_cast<int32_t>(rng::hash(seed + 1, i) % static_cast<uint64_t>(V));
  }
}

}  // namespace

TEST_CASE("MoE router: top-k by score, gates renormalised, capacity drops the latest tokens",
          "[model][moe]") {
  model::MoeConfig cfg;
  cfg.num_experts = 3;
  cfg.top_k = 2;
  // 4 tokens; every one prefers expert 0, then 1 (token 3: 2, with a tie to the lower index).
  const std::vector<float> logits = {3, 2, 0, 3, 1, 0, 2, 1, 0, 1, 0, 0};
  model::moe::Routing r;
  model::moe::route(logits.data(), 4, cfg, r);
  CHECK(r.expert == std::vector<int>{0, 1, 0, 1, 0, 1, 0, 1});
  for (int t = 0; t < 4; ++t) {
    // Softmax over the chosen logits: the renormalised probabilities.
    const float a = logits[static_cast<size_t>(t) * 3], b = logits[static_cast<size_t>(t) * 3 + 1];
    CHECK(r.gate[static_cast<size_t>(t) * 2] == Approx(1.0 / (1.0 + std::exp(b - a))));
    CHECK(r.gate[static_cast<size_t>(t) * 2] + r.gate[static_cast<size_t>(t) * 2 + 1] ==
          Approx(1.0));
  }
  // Dropless: every assignment, grouped by expert, tokens ascending.
  CHECK(r.dropped == 0);
  CHECK(r.offsets == std::vector<int>{0, 4, 8, 8});
  CHECK(r.row_token == std::vector<int>{0, 1, 2, 3, 0, 1, 2, 3});
  // Capacity ceil(0.75 * 4 * 2 / 3) = 2: each expert keeps its first two tokens.
  cfg.capacity_factor = 0.75f;
  model::moe::route(logits.data(), 4, cfg, r);
  CHECK(r.dropped == 4);
  CHECK(r.offsets == std::vector<int>{0, 2, 4, 4});
  CHECK(r.row_token == std::vector<int>{0, 1, 0, 1});
  CHECK(r.row_choice == std::vector<int>{0, 2, 1, 3});
  // Shared experts: every token once more, after the routed rows.
  cfg.capacity_factor = 0;
  cfg.shared_experts = 1;
  model::moe::route(logits.data(), 4, cfg, r);
  CHECK(r.offsets == std::vector<int>{0, 4, 8, 8, 12});
  CHECK(r.row_choice[8] == -1);
}

// Context parallelism: two "CP ranks" each hold half of every sequence's tokens (2 sequences
// of 8 tokens, rank 0 the first 4 of each, rank 1 the rest). With the counts summed over the
// two, their aux shares add up to the whole sequences' aux loss, and each token's router
// gradient is the one the whole sequences give it.
TEST_CASE("MoE aux loss split over context-parallel ranks equals the whole sequences'",
          "[model][moe][cp]") {
  for (const model::MoeScore score : {model::MoeScore::softmax, model::MoeScore::sigmoid}) {
    model::MoeConfig cfg;
    cfg.num_experts = 4;
    cfg.top_k = 2;
    cfg.score = score;
    cfg.aux_loss_coef = 0.3f;
    const int E = 4, K = 2, T = 8, B = 2, half = T / 2;
    std::vector<float> logits(static_cast<size_t>(B * T * E));
    for (size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>(rng::normal(7, i));
    std::vector<float> dgate(static_cast<size_t>(B * T * K));
    for (size_t i = 0; i < dgate.size(); ++i) dgate[i] = static_cast<float>(rng::normal(8, i));
    model::moe::Routing whole;
    model::moe::route(logits.data(), B * T, cfg, whole);
    const model::moe::SequenceLoads all = model::moe::sequence_loads(whole, T, T, cfg);
    std::vector<float> dwhole(logits.size());
    model::moe::router_backward(whole, dgate.data(), &all, 0.7f, cfg, dwhole.data());
    // Each rank's rows: token (b, t) with t in [rank * half, (rank + 1) * half).
    auto rows_of = [&](const std::vector<float>& from, int rank, int width) {
      std::vector<float> out;
      for (int b = 0; b < B; ++b) {
        const auto first = static_cast<size_t>((b * T + rank * half) * width);
        out.insert(out.end(), from.begin() + static_cast<std::ptrdiff_t>(first),
                   from.begin() + static_cast<std::ptrdiff_t>(first + half * width));
      }
      return out;
    };
    std::vector<model::moe::Routing> part(2);
    std::vector<std::vector<float>> counts(2);
    for (int rank = 0; rank < 2; ++rank) {
      const std::vector<float> l = rows_of(logits, rank, E);
      model::moe::route(l.data(), B * half, cfg, part[static_cast<size_t>(rank)]);
      // Record each rank's own counts, as the collective would see them.
      model::moe::sequence_loads(
          part[static_cast<size_t>(rank)], half, T, cfg,
          [&](float* c, size_t n) { counts[static_cast<size_t>(rank)].assign(c, c + n); });
    }
    double shares = 0;
    for (int rank = 0; rank < 2; ++rank) {
      const model::moe::Routing& r = part[static_cast<size_t>(rank)];
      const model::moe::SequenceLoads loads =
          model::moe::sequence_loads(r, half, T, cfg, [&](float* c, size_t n) {
            for (size_t i = 0; i < n; ++i) c[i] = counts[0][i] + counts[1][i];
          });
      shares += model::moe::aux_loss_sum(r, loads, cfg);
      std::vector<float> d(static_cast<size_t>(B * half * E));
      model::moe::router_backward(r, rows_of(dgate, rank, K).data(), &loads, 0.7f, cfg, d.data());
      const std::vector<float> want = rows_of(dwhole, rank, E);
      for (size_t i = 0; i < d.size(); ++i) {
        INFO("rank " << rank << " entry " << i);
        CHECK(d[i] == Approx(want[i]).margin(1e-6));
      }
    }
    CHECK(shares == Approx(model::moe::aux_loss_sum(whole, all, cfg)).epsilon(1e-12));
    CHECK(shares > 0);
  }
}

TEST_CASE("MoE router + grouped experts match a finite-difference directional derivative",
          "[model][moe]") {
  const bool llama = GENERATE(false, true);
  const auto score = GENERATE(model::MoeScore::softmax, model::MoeScore::sigmoid);
  const int shared = GENERATE(0, 1);
  model::ModelConfig c = moe_config(llama, score);
  c.moe.shared_experts = shared;
  const FdResult r = fd_check(c, 0.25f);
  INFO("llama " << llama << " sigmoid " << (score == model::MoeScore::sigmoid) << " shared "
                << shared << " analytic " << r.analytic << " fd " << r.finite_difference);
  REQUIRE(r.routing_stable);  // a choice flipping inside ±eps would make the check meaningless
  CHECK(std::abs(r.analytic) > 1e-1);
  CHECK(r.finite_difference == Approx(r.analytic).epsilon(2e-3));
  // The aux loss reaches the router's gradient (the only parameter it touches).
  const FdResult no_aux = fd_check(c, 0.0f);
  const int64_t router = int64_t{c.moe.num_experts} * c.d_model;
  bool router_differs = false, experts_same = true;
  for (size_t i = 0; i < r.grads.size(); ++i) {
    if (static_cast<int64_t>(i) < router) router_differs |= r.grads[i] != no_aux.grads[i];
    if (static_cast<int64_t>(i) >= router) experts_same &= r.grads[i] == no_aux.grads[i];
  }
  CHECK(router_differs);
  CHECK(experts_same);
}

TEST_CASE("MoE expert bias: it changes the choice, never the gate, and its step balances",
          "[model][moe]") {
  model::MoeConfig cfg;
  cfg.num_experts = 3;
  cfg.top_k = 2;
  cfg.score = model::MoeScore::sigmoid;
  const std::vector<float> logits = {3, 2, 0};
  model::moe::Routing plain, biased;
  model::moe::route(logits.data(), 1, cfg, plain);
  CHECK(plain.expert == std::vector<int>{0, 1});
  // Expert 1's bias pushes it below expert 2: the choice changes, the scores do not, and
  // the gates are the chosen experts' unbiased scores renormalised (DeepSeek-V3).
  const std::vector<float> bias = {0.0f, -1.0f, 0.0f};
  model::moe::route(logits.data(), 1, cfg, biased, bias.data());
  CHECK(biased.expert == std::vector<int>{0, 2});
  CHECK(biased.scores == plain.scores);
  const double s0 = 1 / (1 + std::exp(-3.0)), s2 = 0.5;
  CHECK(biased.gate[0] == Approx(s0 / (s0 + s2)).epsilon(1e-6));
  CHECK(biased.gate[1] == Approx(s2 / (s0 + s2)).epsilon(1e-6));
  // Softmax scores: the same rule (the gates: the chosen probabilities renormalised).
  cfg.score = model::MoeScore::softmax;
  model::moe::route(logits.data(), 1, cfg, biased, bias.data());
  CHECK(biased.expert == std::vector<int>{0, 2});
  CHECK(biased.gate[0] == Approx(1 / (1 + std::exp(-3.0))).epsilon(1e-6));
  // The step: an expert over the mean load falls, one under it rises, one at it stays.
  const std::vector<int64_t> counts = {5, 1, 3};
  std::vector<float> b = {0.0f, 0.0f, 0.5f};
  model::moe::bias_update(counts.data(), 3, 0.1f, b.data());
  CHECK(b == std::vector<float>{-0.1f, 0.1f, 0.5f});
  std::vector<int64_t> counted(3, 0);
  model::moe::count_assignments(biased, 3, counted.data());
  CHECK(counted == std::vector<int64_t>{1, 0, 1});
}

TEST_CASE("MoE with an expert bias matches a finite-difference directional derivative",
          "[model][moe]") {
  const auto score = GENERATE(model::MoeScore::softmax, model::MoeScore::sigmoid);
  model::ModelConfig c = moe_config(true, score);
  c.moe.aux_loss_coef = 0;  // balance: bias has no aux loss
  c.moe.bias_update_rate = 1e-3f;
  const std::vector<float> bias = {0.1f, 0.0f, -0.1f, 0.0f};
  const FdResult r = fd_check(c, 0.25f, bias);
  const FdResult unbiased = fd_check(c, 0.25f);
  INFO("analytic " << r.analytic << " fd " << r.finite_difference);
  REQUIRE(r.routing_stable);
  CHECK(r.finite_difference == Approx(r.analytic).epsilon(2e-3));
  CHECK(r.analytic != unbiased.analytic);  // the bias did change some choice
}

TEST_CASE("MoE statistics count the training micro-batches, not evaluation", "[model][moe]") {
  auto be = ops::make_cpu_backend({});
  model::ModelConfig c = moe_config(false, model::MoeScore::softmax);
  c.moe.capacity_factor = 0.5f;
  model::Gpt gpt(c, *be, 2, 8);
  gpt.init_weights(3);
  std::vector<int32_t> x, y;
  batch(x, y, 16, c.vocab_size, 9);
  const std::vector<model::MoeLayer> layers = gpt.moe_layers();
  REQUIRE(layers.size() == 2);
  CHECK((layers[0].layer == 0 && layers[1].layer == 1));
  int64_t n = 0;
  gpt.forward_loss(x.data(), y.data(), &n);
  for (const model::MoeLayer& l : layers) {
    const auto s = l.ffn->take_step_stats();
    CHECK(std::accumulate(s.counts.begin(), s.counts.end(), int64_t{0}) == 0);
  }
  gpt.forward_backward(x.data(), y.data(), 1.0f / 16, &n);
  gpt.forward_backward(x.data(), y.data(), 1.0f / 16, &n);
  for (const model::MoeLayer& l : layers) {
    const auto s = l.ffn->take_step_stats();
    // Two micro-batches of 16 tokens, top 2; capacity ceil(0.5 * 16 * 2 / 4) = 4 per expert:
    // at most 16 of each micro-batch's 32 assignments are kept.
    CHECK(std::accumulate(s.counts.begin(), s.counts.end(), int64_t{0}) == 2 * 16 * 2);
    CHECK(s.dropped >= 2 * 16);
    CHECK(s.aux_sum > 0);
    CHECK(l.ffn->take_step_stats().dropped == 0);  // taken: the next step starts afresh
  }
}

TEST_CASE("MoE layers: Mixtral's names for llama, counts of total and active parameters",
          "[model][moe]") {
  auto be = ops::make_cpu_backend({});
  model::ModelConfig c = moe_config(true, model::MoeScore::softmax);
  c.n_layer = 4;
  c.moe.layers_every = 2;  // every_2: layers 1 and 3
  model::Gpt gpt(c, *be, 1, 8);
  std::vector<std::string> names;
  for (const auto& s : gpt.params().list()) names.push_back(s.name);
  auto has = [&](const std::string& n) {
    return std::find(names.begin(), names.end(), n) != names.end();
  };
  CHECK(has("model.layers.0.mlp.gate_proj.weight"));
  CHECK_FALSE(has("model.layers.1.mlp.gate_proj.weight"));
  CHECK(has("model.layers.1.block_sparse_moe.gate.weight"));
  CHECK(has("model.layers.3.block_sparse_moe.experts.3.w1.weight"));
  CHECK(has("model.layers.3.block_sparse_moe.experts.3.w2.weight"));
  CHECK(has("model.layers.3.block_sparse_moe.experts.3.w3.weight"));
  CHECK_FALSE(has("model.layers.2.block_sparse_moe.gate.weight"));
  CHECK(numel_of(gpt) == c.num_params());
  // Active: 2 of 4 experts (3 * 12 * 16 each) in each of the 2 MoE layers.
  CHECK(c.num_params() - c.active_params() == 2 * 2 * 3 * 12 * 16);

  model::ModelConfig g = moe_config(false, model::MoeScore::softmax);
  g.moe.shared_experts = 1;
  model::Gpt gpt2(g, *be, 1, 8);
  CHECK(numel_of(gpt2) == g.num_params());
  bool found = false;
  for (const auto& s : gpt2.params().list()) {
    found |= s.name == "transformer.h.1.moe.shared_experts.0.c_proj.bias";
  }
  CHECK(found);
}

TEST_CASE("MoE under recomputation: the same gradients, bit for bit", "[model][moe]") {
  auto be = ops::make_cpu_backend({});
  const bool llama = GENERATE(false, true);
  model::ModelConfig c = moe_config(llama, model::MoeScore::softmax);
  c.moe.capacity_factor = 1.0f;
  std::vector<int32_t> x, y;
  batch(x, y, 16, c.vocab_size, 7);
  std::vector<float> reference;
  for (auto mode : {model::Recompute::none, model::Recompute::selective, model::Recompute::full}) {
    model::GptOptions o;
    o.recompute = mode;
    model::Gpt gpt(c, *be, 2, 8, o);
    gpt.init_weights(5);
    gpt.params().zero_grads();
    int64_t n = 0;
    gpt.forward_backward(x.data(), y.data(), 1.0f / 16, &n);
    std::vector<float> g(gpt.params().grads(), gpt.params().grads() + gpt.params().total());
    if (reference.empty()) {
      reference = g;
      continue;
    }
    INFO(model::to_string(mode));
    REQUIRE(g.size() == reference.size());
    CHECK(std::memcmp(g.data(), reference.data(), g.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("sampling an MoE model is refused with a message, not run dense", "[model][moe]") {
  auto be = ops::make_cpu_backend({});
  const model::WeightLoader load = [](const std::string&, float* out, size_t n) {
    std::fill(out, out + n, 0.0f);
  };
  CHECK_THROWS_WITH(model::GptDecoder(moe_config(true, model::MoeScore::softmax), *be, load),
                    Catch::Contains("mixture-of-experts model is not supported yet"));
}

TEST_CASE("the pipeline partition weighs each layer by its own cost", "[model][moe]") {
  model::ModelConfig c = moe_config(false, model::MoeScore::softmax);
  c.n_layer = 4;
  c.moe.layers_from = 2;  // layers 2 and 3
  c.moe.expert_ffn_hidden = 256;
  // Dense block: attention 4 C^2 + 2 T C, MLP 8 C^2 (C 16, T 8); MoE block: attention, the
  // router (4 C) and 2 experts of 2 * 256 * C.
  const std::vector<double> costs = model::layer_costs(c, 8);
  CHECK(costs == std::vector<double>{3328, 3328, 17728, 17728});
  // Counted per layer, the two dense layers and one MoE layer make the first stage (the last
  // takes one MoE layer and the head); a uniform cost would split 2 + 2.
  const std::vector<model::LayerRange> parts = model::partition_layers(c, 8, 2);
  CHECK(parts == std::vector<model::LayerRange>{{0, 3}, {3, 4}});
}
