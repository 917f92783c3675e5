// Fused LM head + softmax cross-entropy (CPU backend, fp32) against the double reference.
#include "ops/backend.h"
#include "test_ops_reference.h"

namespace ops = trainctl::ops;
namespace ref = trainctl::ops::ref;
using ref::VecD;

TEST_CASE("lm_head_cross_entropy matches the reference, ignoring negative targets", "[ops]") {
  const int threads = GENERATE(1, 2);
  auto be = ops::make_cpu_backend(ops::BackendOptions{threads});
  // N = 300 spans several row blocks (and both threads); N = 10 is a single ragged block.
  const int N = GENERATE(10, 300);
  const int C = 12, V = 11;
  const float dloss = 1.0f / 7.0f;
  std::vector<int32_t> targets(N);
  std::mt19937 gen(101);
  for (auto& t : targets) t = static_cast<int32_t>(gen() % V);
  targets[1] = -1;
  targets[N - 1] = -100;
  // Large logits (|x|,|w| up to 3 => |logit| up to ~100) exercise the max subtraction.
  const auto x = ref::random_floats(static_cast<size_t>(N) * C, 102, -3.0f, 3.0f);
  const auto wte = ref::random_floats(static_cast<size_t>(V) * C, 103, -3.0f, 3.0f);
  const auto dwte0 = ref::random_floats(static_cast<size_t>(V) * C, 104);
  const VecD x_d = ref::to_double(x), wte_d = ref::to_double(wte);
  VecD losses_want(N), dx_want(x.size()), dwte_want = ref::to_double(dwte0);
  ref::lm_head_cross_entropy<double>(losses_want.data(), dx_want.data(), dwte_want.data(),
                                     x_d.data(), wte_d.data(), targets.data(), N, C, V, dloss);

  std::vector<float> losses(N, -1.0f);
  be->lm_head_cross_entropy(losses.data(), nullptr, nullptr, x.data(), wte.data(), targets.data(),
                            N, C, V, dloss);
  ref::require_close(losses, losses_want, 1e-4, "losses (forward only)");
  REQUIRE(losses[1] == 0.0f);
  REQUIRE(losses[N - 1] == 0.0f);

  std::vector<float> dx(x.size(), 5.0f), dwte = dwte0;
  std::fill(losses.begin(), losses.end(), -1.0f);
  be->lm_head_cross_entropy(losses.data(), dx.data(), dwte.data(), x.data(), wte.data(),
                            targets.data(), N, C, V, dloss);
  ref::require_close(losses, losses_want, 1e-4, "losses");
  ref::require_close(dx, dx_want, 1e-4, "dx");
  ref::require_close(dwte, dwte_want, 1e-4, "dwte");
  for (int c = 0; c < C; ++c) REQUIRE(dx[C + c] == 0.0f);  // ignored row: no gradient
}

TEST_CASE("lm_head_cross_entropy rejects targets outside the vocabulary", "[ops]") {
  auto be = ops::make_cpu_backend(ops::BackendOptions{2});
  const int N = 2, C = 4, V = 5;
  std::vector<float> x(N * C, 0.1f), wte(V * C, 0.2f), losses(N);
  std::vector<int32_t> targets = {1, 5};
  REQUIRE_THROWS_AS(be->lm_head_cross_entropy(losses.data(), nullptr, nullptr, x.data(), wte.data(),
                                              targets.data(), N, C, V, 1.0f),
                    std::out_of_range);
}

// The vocab-parallel pieces, with the TP group's reductions done by hand over `parts`
// column slices, must give the full softmax's losses and logit gradients.
TEST_CASE("vocab-parallel cross-entropy over column slices equals the full softmax", "[ops]") {
  const int threads = GENERATE(1, 2);
  const int parts = GENERATE(1, 2, 4);
  auto be = ops::make_cpu_backend(ops::BackendOptions{threads});
  const int N = 37, V = 12, C = 5;
  const int Vl = V / parts;
  const float dloss = 0.25f;
  std::vector<int32_t> targets(N);
  std::mt19937 gen(7);
  for (auto& t : targets) t = static_cast<int32_t>(gen() % V);
  targets[3] = -1;
  const auto x = ref::random_floats(static_cast<size_t>(N) * C, 8, -3.0f, 3.0f);
  const auto wte = ref::random_floats(static_cast<size_t>(V) * C, 9, -3.0f, 3.0f);
  const VecD x_d = ref::to_double(x), wte_d = ref::to_double(wte);
  VecD losses_want(N), dx_want(x.size()), dwte_want(wte.size(), 0.0);
  ref::lm_head_cross_entropy<double>(losses_want.data(), dx_want.data(), dwte_want.data(),
                                     x_d.data(), wte_d.data(), targets.data(), N, C, V, dloss);

  // Per slice: logits, then max / partial sums "allreduced" by hand.
  std::vector<std::vector<float>> logits(static_cast<size_t>(parts));
  std::vector<float> row_max(N, -INFINITY), stats(2 * static_cast<size_t>(N), 0.0f);
  for (int p = 0; p < parts; ++p) {
    auto& l = logits[static_cast<size_t>(p)];
    l.resize(static_cast<size_t>(N) * Vl);
    be->linear_forward(l.data(), x.data(), wte.data() + static_cast<size_t>(p) * Vl * C, nullptr, N,
                       C, Vl);
    std::vector<float> mx(N);
    be->xent_row_max(mx.data(), l.data(), N, Vl);
    for (int i = 0; i < N; ++i) row_max[i] = std::max(row_max[i], mx[i]);
  }
  for (int p = 0; p < parts; ++p) {
    std::vector<float> s(2 * static_cast<size_t>(N));
    be->xent_partial_sums(s.data(), logits[static_cast<size_t>(p)].data(), row_max.data(),
                          targets.data(), {p * Vl, Vl}, N);
    for (size_t i = 0; i < s.size(); ++i) stats[i] += s[i];
  }
  std::vector<float> dx(x.size(), 0.0f), dwte(wte.size(), 0.0f);
  for (int p = 0; p < parts; ++p) {
    std::vector<float> losses(N), dlogits(static_cast<size_t>(N) * Vl);
    const ops::VocabRange vocab{p * Vl, Vl};
    be->xent_finish(losses.data(), dlogits.data(), logits[static_cast<size_t>(p)].data(),
                    row_max.data(), stats.data(), targets.data(), vocab, N, dloss);
    ref::require_close(losses, losses_want, 1e-4, "losses");
    std::vector<float> dx_part(x.size());
    float* dw = dwte.data() + static_cast<size_t>(p) * Vl * C;
    be->linear_backward(dx_part.data(), dw, nullptr, dlogits.data(), x.data(),
                        wte.data() + static_cast<size_t>(p) * Vl * C, N, C, Vl);
    for (size_t i = 0; i < dx.size(); ++i) dx[i] += dx_part[i];
  }
  ref::require_close(dx, dx_want, 1e-4, "dx");
  ref::require_close(dwte, dwte_want, 1e-4, "dwte");
}

TEST_CASE("a vocab slice of the embedding contributes only its own tokens", "[ops]") {
  auto be = ops::make_cpu_backend(ops::BackendOptions{1});
  const int B = 2, T = 3, C = 4, V = 6;
  const std::vector<int32_t> tokens = {0, 5, 3, 2, 4, 1};
  const auto wte = ref::random_floats(static_cast<size_t>(V) * C, 11);
  const auto wpe = ref::random_floats(static_cast<size_t>(T) * C, 12);
  std::vector<float> full(static_cast<size_t>(B) * T * C), sum(full.size(), 0.0f);
  be->embedding_forward(full.data(), tokens.data(), wte.data(), {0, V}, wpe.data(), B, T, C);
  for (int p = 0; p < 2; ++p) {
    std::vector<float> part(full.size());
    be->embedding_forward(part.data(), tokens.data(), wte.data() + static_cast<size_t>(p) * 3 * C,
                          {3 * p, 3}, p == 0 ? wpe.data() : nullptr, B, T, C);
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += part[i];
  }
  for (size_t i = 0; i < full.size(); ++i) REQUIRE(sum[i] == Approx(full[i]).margin(1e-6));
  const auto dout = ref::random_floats(full.size(), 13);
  std::vector<float> dwte_full(wte.size(), 0.0f), dwte_slice(static_cast<size_t>(3) * C, 0.0f);
  be->embedding_backward(dwte_full.data(), nullptr, dout.data(), tokens.data(), {0, V}, B, T, C);
  be->embedding_backward(dwte_slice.data(), nullptr, dout.data(), tokens.data(), {3, 3}, B, T, C);
  for (size_t i = 0; i < dwte_slice.size(); ++i) REQUIRE(dwte_slice[i] == dwte_full[3 * C + i]);
}
