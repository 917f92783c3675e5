// The double-precision reference ops' analytic backward agrees with central finite
// differences. Together with the backend-vs-reference tests this proves the backend's
// backward passes without finite differences in fp32.
#include "test_ops_reference.h"

namespace ref = trainctl::ops::ref;
using ref::VecD;

namespace {

// |analytic - numeric| small relative to the gradient's scale.
void require_grad_match(const VecD& analytic, const VecD& numeric, const char* what) {
  REQUIRE(analytic.size() == numeric.size());
  const double scale = std::max(1.0, ref::max_abs(numeric));
  double worst = 0.0;
  for (size_t i = 0; i < analytic.size(); ++i) {
    worst = std::max(worst, std::fabs(analytic[i] - numeric[i]) / scale);
  }
  INFO(what << ": worst relative error " << worst);
  REQUIRE(worst < 1e-7);
}

}  // namespace

TEST_CASE("reference linear backward matches finite differences", "[ops]") {
  const int N = 3, IC = 5, OC = 4;
  const VecD inp = ref::to_double(ref::random_floats(N * IC, 1));
  const VecD w = ref::to_double(ref::random_floats(OC * IC, 2));
  const VecD b = ref::to_double(ref::random_floats(OC, 3));
  const VecD r = ref::to_double(ref::random_floats(N * OC, 4));
  auto loss = [&](const VecD& i, const VecD& ww, const VecD& bb) {
    VecD out(N * OC);
    ref::linear_forward(out.data(), i.data(), ww.data(), bb.data(), N, IC, OC);
    return ref::dot(out, r);
  };
  VecD dinp(N * IC), dw(OC * IC, 0.0), db(OC, 0.0);
  ref::linear_backward(dinp.data(), dw.data(), db.data(), r.data(), inp.data(), w.data(), N, IC,
                       OC);
  require_grad_match(dinp, ref::numeric_grad([&](const VecD& x) { return loss(x, w, b); }, inp),
                     "dinp");
  require_grad_match(dw, ref::numeric_grad([&](const VecD& x) { return loss(inp, x, b); }, w),
                     "dweight");
  require_grad_match(db, ref::numeric_grad([&](const VecD& x) { return loss(inp, w, x); }, b),
                     "dbias");
}

TEST_CASE("reference layernorm backward matches finite differences", "[ops]") {
  const int N = 3, C = 7;
  const VecD inp = ref::to_double(ref::random_floats(N * C, 5, -2.0f, 2.0f));
  const VecD w = ref::to_double(ref::random_floats(C, 6));
  const VecD b = ref::to_double(ref::random_floats(C, 7));
  const VecD r = ref::to_double(ref::random_floats(N * C, 8));
  auto loss = [&](const VecD& i, const VecD& ww, const VecD& bb) {
    VecD out(N * C), mean(N), rstd(N);
    ref::layernorm_forward(out.data(), mean.data(), rstd.data(), i.data(), ww.data(), bb.data(), N,
                           C);
    return ref::dot(out, r);
  };
  VecD out(N * C), mean(N), rstd(N), dinp(N * C), dw(C, 0.0), db(C, 0.0);
  ref::layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), w.data(), b.data(), N,
                         C);
  ref::layernorm_backward(dinp.data(), dw.data(), db.data(), r.data(), inp.data(), w.data(),
                          mean.data(), rstd.data(), N, C);
  require_grad_match(dinp, ref::numeric_grad([&](const VecD& x) { return loss(x, w, b); }, inp),
                     "dinp");
  require_grad_match(dw, ref::numeric_grad([&](const VecD& x) { return loss(inp, x, b); }, w),
                     "dweight");
  require_grad_match(db, ref::numeric_grad([&](const VecD& x) { return loss(inp, w, x); }, b),
                     "dbias");
}

TEST_CASE("reference gelu gradient matches finite differences", "[ops]") {
  for (double x : {-6.0, -2.5, -1.0, -0.3, 0.0, 0.1, 0.7, 1.5, 3.0, 8.0}) {
    const double h = 1e-6;
    const double numeric = (ref::gelu(x + h) - ref::gelu(x - h)) / (2 * h);
    INFO("x = " << x);
    REQUIRE(std::fabs(ref::gelu_grad(x) - numeric) < 1e-8);
  }
}

TEST_CASE("reference attention backward matches finite differences", "[ops]") {
  const int B = 2, T = 5, C = 12, NH = 3;
  const VecD qkv = ref::to_double(ref::random_floats(B * T * 3 * C, 9));
  const VecD r = ref::to_double(ref::random_floats(B * T * C, 10));
  auto loss = [&](const VecD& x) {
    VecD out(B * T * C), lse(B * NH * T);
    ref::attention_forward(out.data(), lse.data(), x.data(), B, T, C, NH);
    return ref::dot(out, r);
  };
  VecD out(B * T * C), lse(B * NH * T), dqkv(qkv.size());
  ref::attention_forward(out.data(), lse.data(), qkv.data(), B, T, C, NH);
  ref::attention_backward(dqkv.data(), r.data(), qkv.data(), out.data(), lse.data(), B, T, C, NH);
  require_grad_match(dqkv, ref::numeric_grad(loss, qkv), "dqkv");
}

TEST_CASE("reference embedding backward matches finite differences", "[ops]") {
  const int B = 2, T = 3, C = 4, V = 5;
  const std::vector<int32_t> tokens = {1, 4, 1, 0, 2, 4};
  const VecD wte = ref::to_double(ref::random_floats(V * C, 11));
  const VecD wpe = ref::to_double(ref::random_floats(T * C, 12));
  const VecD r = ref::to_double(ref::random_floats(B * T * C, 13));
  auto loss = [&](const VecD& te, const VecD& pe) {
    VecD out(B * T * C);
    ref::embedding_forward(out.data(), tokens.data(), te.data(), pe.data(), B, T, C);
    return ref::dot(out, r);
  };
  VecD dwte(V * C, 0.0), dwpe(T * C, 0.0);
  ref::embedding_backward(dwte.data(), dwpe.data(), r.data(), tokens.data(), B, T, C);
  require_grad_match(dwte, ref::numeric_grad([&](const VecD& x) { return loss(x, wpe); }, wte),
                     "dwte");
  require_grad_match(dwpe, ref::numeric_grad([&](const VecD& x) { return loss(wte, x); }, wpe),
                     "dwpe");
}

TEST_CASE("reference lm_head cross-entropy backward matches finite differences", "[ops]") {
  const int N = 4, C = 6, V = 11;
  const std::vector<int32_t> targets = {3, -1, 10, 0};
  const double dloss = 0.7;
  const VecD x = ref::to_double(ref::random_floats(N * C, 14));
  const VecD wte = ref::to_double(ref::random_floats(V * C, 15));
  auto loss = [&](const VecD& xx, const VecD& w) {
    VecD losses(N);
    ref::lm_head_cross_entropy<double>(losses.data(), nullptr, nullptr, xx.data(), w.data(),
                                       targets.data(), N, C, V, dloss);
    double s = 0.0;
    for (double l : losses) s += l;
    return dloss * s;
  };
  VecD losses(N), dx(N * C), dwte(V * C, 0.0);
  ref::lm_head_cross_entropy(losses.data(), dx.data(), dwte.data(), x.data(), wte.data(),
                             targets.data(), N, C, V, dloss);
  REQUIRE(losses[1] == 0.0);
  require_grad_match(dx, ref::numeric_grad([&](const VecD& v) { return loss(v, wte); }, x), "dx");
  require_grad_match(dwte, ref::numeric_grad([&](const VecD& v) { return loss(x, v); }, wte),
                     "dwte");
}
