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
