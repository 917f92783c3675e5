// CPU backend (fp32) against the double reference: GEMM, linear, layernorm, GELU,
// embeddings and the elementwise ops. Backward passes are checked here against the
// reference's analytic backward, which test_ops_reference.cpp checks against finite
// differences.
#include <cstring>
#include <limits>

#include "ops/backend.h"
#include "test_ops_reference.h"

namespace ops = trainctl::ops;
namespace ref = trainctl::ops::ref;
using ref::VecD;

namespace {
constexpr double kTol = 1e-4;

std::unique_ptr<ops::Backend> backend(int threads) {
  return ops::make_cpu_backend(ops::BackendOptions{threads});
}
}  // namespace

TEST_CASE("gemm: all four transpose cases, alpha/beta and padded leading dims", "[ops]") {
  const int threads = GENERATE(1, 2);
  auto be = backend(threads);
  // Large enough (2*M*N*K > 4M flops) that 2 threads really split the product.
  const int M = GENERATE(7, 160), N = 130, K = 101;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const int lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 5, ldc = N + 2;
      const auto a = ref::random_floats(static_cast<size_t>(ta ? K : M) * lda, 21);
      const auto b = ref::random_floats(static_cast<size_t>(tb ? N : K) * ldb, 22);
      auto c = ref::random_floats(static_cast<size_t>(M) * ldc, 23);
      VecD want = ref::to_double(c);
      const VecD ad = ref::to_double(a), bd = ref::to_double(b);
      ref::gemm(ta, tb, M, N, K, 0.5, ad.data(), lda, bd.data(), ldb, -1.5, want.data(), ldc);
      be->gemm(ta, tb, M, N, K, 0.5f, a.data(), lda, b.data(), ldb, -1.5f, c.data(), ldc);
      INFO("trans_a=" << ta << " trans_b=" << tb << " M=" << M << " threads=" << threads);
      ref::require_close(c, want, kTol, "C");
    }
  }
}

// Grouped products (an MoE layer's experts): each group against the double reference, with
// groups of very different sizes (one empty, one larger than all others together, so the
// split by work gives one thread a single group) and all four transpose cases.
TEST_CASE("gemm_grouped: every group equals its own product, whatever the split", "[ops]") {
  const int threads = GENERATE(1, 2, 3);
  auto be = backend(threads);
  const std::vector<int> rows = {37, 0, 300, 5, 64, 1};
  const int N = 48, K = 33;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      std::vector<std::vector<float>> a, b, c;
      std::vector<VecD> want;
      std::vector<ops::Backend::GemmGroup> groups;
      for (size_t g = 0; g < rows.size(); ++g) {
        const int M = rows[g];
        const int lda = ta ? M + 1 : K + 2, ldb = tb ? K + 3 : N, ldc = N + 1;
        const auto seed = static_cast<uint32_t>(40 + g);
        a.push_back(ref::random_floats(static_cast<size_t>(ta ? K : M) * lda + 1, seed));
        b.push_back(ref::random_floats(static_cast<size_t>(tb ? N : K) * ldb, seed + 100));
        c.push_back(ref::random_floats(static_cast<size_t>(M) * ldc + 1, seed + 200));
        want.push_back(ref::to_double(c.back()));
        const VecD ad = ref::to_double(a.back()), bd = ref::to_double(b.back());
        ref::gemm(ta, tb, M, N, K, 0.5, ad.data(), lda, bd.data(), ldb, 1.0, want.back().data(),
                  ldc);
      }
      for (size_t g = 0; g < rows.size(); ++g) {
        const int M = rows[g];
        groups.push_back({M, N, K, a[g].data(), ta ? M + 1 : K + 2, b[g].data(), tb ? K + 3 : N,
                          c[g].data(), N + 1});
      }
      be->gemm_grouped(ta, tb, 0.5f, 1.0f, groups);
      for (size_t g = 0; g < rows.size(); ++g) {
        INFO("trans_a=" << ta << " trans_b=" << tb << " group " << g << " threads=" << threads);
        ref::require_close(c[g], want[g], kTol, "C");
      }
    }
  }
}

TEST_CASE("gemm rejects leading dimensions that are too small", "[ops]") {
  auto be = backend(1);
  std::vector<float> a(16), b(16), c(16);
  REQUIRE_THROWS_AS(
      be->gemm(false, false, 4, 4, 4, 1.0f, a.data(), 3, b.data(), 4, 0.0f, c.data(), 4),
      std::invalid_argument);
}

TEST_CASE("linear forward/backward match the reference", "[ops]") {
  const int threads = GENERATE(1, 2);
  const bool with_bias = GENERATE(true, false);
  auto be = backend(threads);
  const int N = GENERATE(10, 300), IC = 12, OC = 36;
  const auto inp = ref::random_floats(N * IC, 31);
  const auto w = ref::random_floats(OC * IC, 32);
  const auto bias = ref::random_floats(OC, 33);
  const auto dout = ref::random_floats(N * OC, 34);
  const auto dw0 = ref::random_floats(OC * IC, 35);  // gradients accumulate onto these
  const auto db0 = ref::random_floats(OC, 36);
  const VecD inp_d = ref::to_double(inp), w_d = ref::to_double(w), b_d = ref::to_double(bias),
             dout_d = ref::to_double(dout);

  VecD out_want(N * OC);
  ref::linear_forward(out_want.data(), inp_d.data(), w_d.data(), with_bias ? b_d.data() : nullptr,
                      N, IC, OC);
  std::vector<float> out(N * OC, 123.0f);
  be->linear_forward(out.data(), inp.data(), w.data(), with_bias ? bias.data() : nullptr, N, IC,
                     OC);
  ref::require_close(out, out_want, kTol, "out");

  VecD dinp_want(N * IC), dw_want = ref::to_double(dw0), db_want = ref::to_double(db0);
  ref::linear_backward(dinp_want.data(), dw_want.data(), with_bias ? db_want.data() : nullptr,
                       dout_d.data(), inp_d.data(), w_d.data(), N, IC, OC);
  std::vector<float> dinp(N * IC, std::numeric_limits<float>::quiet_NaN()), dw = dw0, db = db0;
  be->linear_backward(dinp.data(), dw.data(), with_bias ? db.data() : nullptr, dout.data(),
                      inp.data(), w.data(), N, IC, OC);
  ref::require_close(dinp, dinp_want, kTol, "dinp");
  ref::require_close(dw, dw_want, kTol, "dweight");
  ref::require_close(db, db_want, kTol, "dbias");

  // dinp may be skipped (first layer): parameter gradients still accumulate.
  be->linear_backward(nullptr, dw.data(), nullptr, dout.data(), inp.data(), w.data(), N, IC, OC);
}

TEST_CASE("layernorm forward/backward match the reference", "[ops]") {
  const int threads = GENERATE(1, 2);
  auto be = backend(threads);
  const int N = GENERATE(10, 2100), C = 24;
  // An offset mean checks that the variance is not computed as E[x^2] - E[x]^2.
  const auto inp = ref::random_floats(N * C, 41, 2.0f, 5.0f);
  const auto w = ref::random_floats(C, 42);
  const auto b = ref::random_floats(C, 43);
  const auto dout = ref::random_floats(N * C, 44);
  const auto dw0 = ref::random_floats(C, 45);
  const auto db0 = ref::random_floats(C, 46);
  const VecD inp_d = ref::to_double(inp), w_d = ref::to_double(w), b_d = ref::to_double(b),
             dout_d = ref::to_double(dout);
  VecD out_want(N * C), mean_want(N), rstd_want(N);
  ref::layernorm_forward(out_want.data(), mean_want.data(), rstd_want.data(), inp_d.data(),
                         w_d.data(), b_d.data(), N, C);
  std::vector<float> out(N * C), mean(N), rstd(N);
  be->layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), w.data(), b.data(), N, C);
  ref::require_close(out, out_want, kTol, "out");
  ref::require_close(mean, mean_want, kTol, "mean");
  ref::require_close(rstd, rstd_want, kTol, "rstd");

  VecD dinp_want(N * C), dw_want = ref::to_double(dw0), db_want = ref::to_double(db0);
  ref::layernorm_backward(dinp_want.data(), dw_want.data(), db_want.data(), dout_d.data(),
                          inp_d.data(), w_d.data(), mean_want.data(), rstd_want.data(), N, C);
  std::vector<float> dinp(N * C, 7.0f), dw = dw0, db = db0;
  be->layernorm_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(),
                         mean.data(), rstd.data(), N, C);
  ref::require_close(dinp, dinp_want, kTol, "dinp");
  ref::require_close(dw, dw_want, kTol, "dweight");
  ref::require_close(db, db_want, kTol, "dbias");
}

TEST_CASE("gelu forward/backward match the tanh-approximation reference", "[ops]") {
  const int threads = GENERATE(1, 2);
  auto be = backend(threads);
  const size_t n = 70001;
  auto inp = ref::random_floats(n, 51, -8.0f, 8.0f);
  inp[0] = 0.0f;
  inp[1] = -30.0f;
  inp[2] = 30.0f;
  inp[3] = 1e-4f;
  const auto dout = ref::random_floats(n, 52);
  VecD out_want(n), dinp_want(n);
  for (size_t i = 0; i < n; ++i) {
    out_want[i] = ref::gelu<double>(inp[i]);
    dinp_want[i] = dout[i] * ref::gelu_grad<double>(inp[i]);
  }
  std::vector<float> out(n), dinp(n);
  be->gelu_forward(out.data(), inp.data(), n);
  be->gelu_backward(dinp.data(), inp.data(), dout.data(), n);
  ref::require_close(out, out_want, kTol, "gelu");
  ref::require_close(dinp, dinp_want, kTol, "dgelu");
  REQUIRE(out[0] == 0.0f);
  REQUIRE(std::fabs(out[1]) < 1e-30f);
  REQUIRE(out[2] == 30.0f);
}

TEST_CASE("embedding forward/backward match the reference", "[ops]") {
  const int threads = GENERATE(1, 2);
  auto be = backend(threads);
  const int T = GENERATE(5, 300);
  const int C = GENERATE(12, 64);
  const int B = 2, V = 11;
  std::vector<int32_t> tokens(B * T);
  std::mt19937 gen(61);
  for (auto& t : tokens) t = static_cast<int32_t>(gen() % V);
  const auto wte = ref::random_floats(V * C, 62);
  const auto wpe = ref::random_floats(T * C, 63);
  const auto dout = ref::random_floats(B * T * C, 64);
  const auto dwte0 = ref::random_floats(V * C, 65);
  const auto dwpe0 = ref::random_floats(T * C, 66);
  const VecD wte_d = ref::to_double(wte), wpe_d = ref::to_double(wpe),
             dout_d = ref::to_double(dout);
  VecD out_want(B * T * C);
  ref::embedding_forward(out_want.data(), tokens.data(), wte_d.data(), wpe_d.data(), B, T, C);
  std::vector<float> out(B * T * C);
  be->embedding_forward(out.data(), tokens.data(), wte.data(), {0, V}, wpe.data(), B, T, C);
  ref::require_close(out, out_want, kTol, "out");
  VecD dwte_want = ref::to_double(dwte0), dwpe_want = ref::to_double(dwpe0);
  ref::embedding_backward(dwte_want.data(), dwpe_want.data(), dout_d.data(), tokens.data(), B, T,
                          C);
  std::vector<float> dwte = dwte0, dwpe = dwpe0;
  be->embedding_backward(dwte.data(), dwpe.data(), dout.data(), tokens.data(), {0, V}, B, T, C);
  ref::require_close(dwte, dwte_want, kTol, "dwte");
  ref::require_close(dwpe, dwpe_want, kTol, "dwpe");
  be->embedding_backward(dwte.data(), nullptr, dout.data(), tokens.data(), {0, V}, B, T, C);
}

TEST_CASE("elementwise ops, copies and sum of squares", "[ops]") {
  const int threads = GENERATE(1, 2);
  auto be = backend(threads);
  const size_t n = GENERATE(size_t{13}, size_t{300001});
  const auto a = ref::random_floats(n, 71);
  const auto b = ref::random_floats(n, 72);
  std::vector<float> out(n);
  be->add(out.data(), a.data(), b.data(), n);
  for (size_t i = 0; i < n; ++i) REQUIRE(out[i] == a[i] + b[i]);
  std::vector<float> acc = a;
  be->add_inplace(acc.data(), b.data(), n);
  REQUIRE(acc == out);
  be->add(acc.data(), acc.data(), b.data(), n);  // out aliasing an input
  for (size_t i = 0; i < n; ++i) REQUIRE(acc[i] == out[i] + b[i]);
  be->scale(acc.data(), 0.5f, n);
  for (size_t i = 0; i < n; ++i) REQUIRE(acc[i] == (out[i] + b[i]) * 0.5f);
  be->copy(acc.data(), a.data(), n);
  REQUIRE(acc == a);
  be->zero(acc.data(), n);
  for (float x : acc) REQUIRE(x == 0.0f);

  double want = 0.0;
  for (float x : a) want += static_cast<double>(x) * x;
  REQUIRE(be->sum_squares(a.data(), n) == Approx(want).epsilon(1e-12));

  float* p = static_cast<float*>(be->alloc(n * sizeof(float)));
  REQUIRE(reinterpret_cast<uintptr_t>(p) % 64 == 0);
  for (size_t i = 0; i < n; ++i) REQUIRE(p[i] == 0.0f);
  be->free(p);
}
