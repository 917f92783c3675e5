// One thread and two threads give the same results (within 1e-6 relative to each output's
// scale) on shapes large enough that every op really splits its work.
#include "ops/backend.h"
#include "test_ops_reference.h"

namespace ops = trainctl::ops;
namespace ref = trainctl::ops::ref;

namespace {

void require_same(const std::vector<float>& a, const std::vector<float>& b, const char* what) {
  REQUIRE(a.size() == b.size());
  double scale = 0.0;
  for (float x : a) scale = std::max(scale, std::fabs(static_cast<double>(x)));
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(double(a[i]) - b[i]));
  INFO(what << ": max difference " << worst << " at scale " << scale);
  REQUIRE(worst <= 1e-6 * std::max(scale, 1.0));
}

// Runs a small forward/backward of every op family on `be` and returns all outputs.
std::vector<std::vector<float>> run_all(ops::Backend& be) {
  std::vector<std::vector<float>> results;
  const int B = 4, T = 80, C = 32, NH = 4, V = 37, N = B * T;
  const auto x = ref::random_floats(static_cast<size_t>(N) * C, 201);
  const auto w = ref::random_floats(static_cast<size_t>(3 * C) * C, 202);
  const auto bias = ref::random_floats(3 * C, 203);
  const auto dy = ref::random_floats(static_cast<size_t>(N) * 3 * C, 204);

  std::vector<float> y(static_cast<size_t>(N) * 3 * C), dx(x.size()), dw(w.size()), db(bias.size());
  be.linear_forward(y.data(), x.data(), w.data(), bias.data(), N, C, 3 * C);
  be.linear_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), N, C, 3 * C);
  results.insert(results.end(), {y, dx, dw, db});

  std::vector<float> att(x.size()), lse(static_cast<size_t>(B) * NH * T), dqkv(y.size());
  be.attention_forward(att.data(), lse.data(), y.data(), B, T, C, NH);
  be.attention_backward(dqkv.data(), x.data(), y.data(), att.data(), lse.data(), B, T, C, NH);
  results.insert(results.end(), {att, lse, dqkv});

  std::vector<float> ln(x.size()), mean(N), rstd(N), dln(x.size()), dlw(C), dlb(C);
  be.layernorm_forward(ln.data(), mean.data(), rstd.data(), x.data(), bias.data(), bias.data() + C,
                       N, C);
  be.layernorm_backward(dln.data(), dlw.data(), dlb.data(), att.data(), x.data(), bias.data(),
                        mean.data(), rstd.data(), N, C);
  results.insert(results.end(), {ln, mean, rstd, dln, dlw, dlb});

  std::vector<float> g(y.size()), dg(y.size());
  be.gelu_forward(g.data(), y.data(), y.size());
  be.gelu_backward(dg.data(), y.data(), dy.data(), y.size());
  results.insert(results.end(), {g, dg});

  std::vector<int32_t> tokens(N);
  for (int i = 0; i < N; ++i) tokens[i] = (i * 7) % V - (i % 13 == 0 ? V : 0);
  std::vector<float> losses(N), dlx(x.size()), dwte(static_cast<size_t>(V) * C);
  be.lm_head_cross_entropy(losses.data(), dlx.data(), dwte.data(), x.data(), w.data(),
                           tokens.data(), N, C, V, 0.01f);
  results.insert(results.end(), {losses, dlx, dwte});

  for (auto& t : tokens) t = t < 0 ? 0 : t;
  std::vector<float> emb(x.size()), dwte2(static_cast<size_t>(V) * C),
      dwpe(static_cast<size_t>(T) * C);
  be.embedding_forward(emb.data(), tokens.data(), w.data(), {0, V}, x.data(), B, T, C);
  be.embedding_backward(dwte2.data(), dwpe.data(), att.data(), tokens.data(), {0, V}, B, T, C);
  results.insert(results.end(), {emb, dwte2, dwpe});

  std::vector<float> p = y, m(y.size()), v(y.size());
  be.adamw(p.data(), dy.data(), m.data(), v.data(), p.size(), 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1);
  results.insert(results.end(),
                 {p, m, v, {static_cast<float>(be.sum_squares(y.data(), y.size()))}});
  return results;
}

}  // namespace

TEST_CASE("one and two threads give the same results", "[ops]") {
  auto one = ops::make_cpu_backend(ops::BackendOptions{1});
  auto two = ops::make_cpu_backend(ops::BackendOptions{2});
  REQUIRE(one->threads() == 1);
  REQUIRE(two->threads() == 2);
  const auto a = run_all(*one);
  const auto b = run_all(*two);
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("output #" << i);
    require_same(a[i], b[i], "output");
  }
  // Same thread count, same bits: the static split makes reductions deterministic.
  const auto c = run_all(*two);
  for (size_t i = 0; i < b.size(); ++i) REQUIRE(b[i] == c[i]);
}

TEST_CASE("the CPU backend refuses a thread count below 1", "[ops]") {
  REQUIRE_THROWS_AS(ops::make_cpu_backend(ops::BackendOptions{0}), std::invalid_argument);
}
