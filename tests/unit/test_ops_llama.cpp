// The Llama family's ops: the double references' backward against central finite
// differences, then the CPU backend (fp32, every kernel path through the `ops_on_<isa>`
// tests) against those references: RMSNorm, rotary embedding, SwiGLU and grouped-query
// attention.
#include "ops/backend.h"
#include "test_ops_llama_reference.h"
#include "test_ops_reference.h"

namespace ops = trainctl::ops;
namespace ref = trainctl::ops::ref;
using ref::VecD;

namespace {

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

TEST_CASE("reference rmsnorm backward matches finite differences", "[ops]") {
  const int N = 3, C = 7;
  const double eps = 1e-5;
  const VecD inp = ref::to_double(ref::random_floats(N * C, 21, -2.0f, 2.0f));
  const VecD w = ref::to_double(ref::random_floats(C, 22));
  const VecD r = ref::to_double(ref::random_floats(N * C, 23));
  auto loss = [&](const VecD& i, const VecD& ww) {
    VecD out(N * C), rstd(N);
    ref::rmsnorm_forward(out.data(), rstd.data(), i.data(), ww.data(), N, C, eps);
    return ref::dot(out, r);
  };
  VecD out(N * C), rstd(N), dinp(N * C), dw(C, 0.0);
  ref::rmsnorm_forward(out.data(), rstd.data(), inp.data(), w.data(), N, C, eps);
  ref::rmsnorm_backward(dinp.data(), dw.data(), r.data(), inp.data(), w.data(), rstd.data(), N, C);
  require_grad_match(dinp, ref::numeric_grad([&](const VecD& x) { return loss(x, w); }, inp),
                     "dinp");
  require_grad_match(dw, ref::numeric_grad([&](const VecD& x) { return loss(inp, x); }, w), "dw");
}

TEST_CASE("reference rope gradient (the inverse rotation) matches finite differences", "[ops]") {
  const int B = 2, T = 3, heads = 2, hd = 6, stride = 15, pos0 = 4;
  const VecD x = ref::to_double(ref::random_floats(B * T * stride, 24));
  const VecD r = ref::to_double(ref::random_floats(B * T * stride, 25));
  auto loss = [&](const VecD& in) {
    VecD y = in;
    ref::rope(y.data(), B, T, stride, heads, hd, 10000.0, pos0);
    return ref::dot(y, r);
  };
  VecD dx = r;
  ref::rope(dx.data(), B, T, stride, heads, hd, 10000.0, pos0, -1.0);
  require_grad_match(dx, ref::numeric_grad(loss, x), "dx");
}

TEST_CASE("reference swiglu backward matches finite differences", "[ops]") {
  const int N = 3, H = 5;
  const VecD gu = ref::to_double(ref::random_floats(N * 2 * H, 26, -4.0f, 4.0f));
  const VecD r = ref::to_double(ref::random_floats(N * H, 27));
  auto loss = [&](const VecD& x) {
    VecD out(N * H);
    ref::swiglu_forward(out.data(), x.data(), N, H);
    return ref::dot(out, r);
  };
  VecD dgu(gu.size());
  ref::swiglu_backward(dgu.data(), r.data(), gu.data(), N, H);
  require_grad_match(dgu, ref::numeric_grad(loss, gu), "dgate_up");
}

TEST_CASE("reference grouped-query attention backward matches finite differences", "[ops]") {
  const int B = 2, T = 4, NH = 4, NKV = 2, hd = 3;
  const int W = (NH + 2 * NKV) * hd;
  const VecD qkv = ref::to_double(ref::random_floats(B * T * W, 28));
  const VecD r = ref::to_double(ref::random_floats(B * T * NH * hd, 29));
  auto loss = [&](const VecD& x) {
    VecD out(B * T * NH * hd), lse(B * NH * T);
    ref::gqa_forward(out.data(), lse.data(), x.data(), B, T, NH, NKV, hd);
    return ref::dot(out, r);
  };
  VecD out(B * T * NH * hd), lse(B * NH * T), dqkv(qkv.size());
  ref::gqa_forward(out.data(), lse.data(), qkv.data(), B, T, NH, NKV, hd);
  ref::gqa_backward(dqkv.data(), r.data(), qkv.data(), out.data(), lse.data(), B, T, NH, NKV, hd);
  require_grad_match(dqkv, ref::numeric_grad(loss, qkv), "dqkv");
}

TEST_CASE("rmsnorm forward/backward match the reference", "[ops]") {
  const int threads = GENERATE(1, 2);
  auto be = ops::make_cpu_backend(ops::BackendOptions{threads});
  const int N = 37, C = 48;
  const float eps = 1e-5f;
  const auto inp = ref::random_floats(N * C, 31, -2.0f, 2.0f);
  const auto w = ref::random_floats(C, 32);
  const auto dout = ref::random_floats(N * C, 33);
  VecD out_w(N * C), rstd_w(N), dinp_w(N * C), dw_w(C, 0.0);
  const VecD inp_d = ref::to_double(inp), w_d = ref::to_double(w), dout_d = ref::to_double(dout);
  ref::rmsnorm_forward(out_w.data(), rstd_w.data(), inp_d.data(), w_d.data(), N, C, double{eps});
  ref::rmsnorm_backward(dinp_w.data(), dw_w.data(), dout_d.data(), inp_d.data(), w_d.data(),
                        rstd_w.data(), N, C);
  std::vector<float> out(N * C), rstd(N), dinp(N * C, 42.0f), dw(C, 0.0f);
  be->rmsnorm_forward(out.data(), rstd.data(), inp.data(), w.data(), N, C, eps);
  ref::require_close(out, out_w, 1e-5, "out");
  ref::require_close(rstd, rstd_w, 1e-5, "rstd");
  be->rmsnorm_backward(dinp.data(), dw.data(), dout.data(), inp.data(), w.data(), rstd.data(), N,
                       C);
  ref::require_close(dinp, dinp_w, 1e-4, "dinp");
  ref::require_close(dw, dw_w, 1e-4, "dw");
}

TEST_CASE("rope forward/backward match the reference, with a position offset", "[ops]") {
  const int threads = GENERATE(1, 2);
  auto be = ops::make_cpu_backend(ops::BackendOptions{threads});
  // q and k of a GQA qkv row (4 + 2 heads of 8) rotated together; v left alone.
  const int B = 2, T = 9, hd = 8, heads = 6, stride = 8 * hd;
  const int pos0 = GENERATE(0, 5);
  const float theta = GENERATE(10000.0f, 500000.0f);
  const auto x = ref::random_floats(B * T * stride, 34);
  std::vector<float> y = x;
  be->rope_forward(y.data(), B, T, stride, heads, hd, theta, pos0);
  VecD want = ref::to_double(x);
  ref::rope(want.data(), B, T, stride, heads, hd, double{theta}, pos0);
  ref::require_close(y, want, 1e-5, "rope forward");
  for (int r = 0; r < B * T; ++r) {
    for (int i = heads * hd; i < stride; ++i) REQUIRE(y[r * stride + i] == x[r * stride + i]);
  }
  be->rope_backward(y.data(), B, T, stride, heads, hd, theta, pos0);
  ref::require_close(y, ref::to_double(x), 1e-5, "rope backward undoes forward");
}

TEST_CASE("swiglu forward/backward match the reference", "[ops]") {
  const int threads = GENERATE(1, 2);
  auto be = ops::make_cpu_backend(ops::BackendOptions{threads});
  const int N = 29, H = 40;
  const auto gu = ref::random_floats(N * 2 * H, 35, -6.0f, 6.0f);
  const auto dout = ref::random_floats(N * H, 36);
  const VecD gu_d = ref::to_double(gu), dout_d = ref::to_double(dout);
  VecD out_w(N * H), dgu_w(gu.size());
  ref::swiglu_forward(out_w.data(), gu_d.data(), N, H);
  ref::swiglu_backward(dgu_w.data(), dout_d.data(), gu_d.data(), N, H);
  std::vector<float> out(N * H), dgu(gu.size(), 42.0f);
  be->swiglu_forward(out.data(), gu.data(), N, H);
  be->swiglu_backward(dgu.data(), dout.data(), gu.data(), N, H);
  ref::require_close(out, out_w, 1e-5, "out");
  ref::require_close(dgu, dgu_w, 1e-5, "dgate_up");
}

namespace {

struct GqaCase {
  int B, T, NH, NKV, hd;
};

void check_gqa(const GqaCase& c, int threads) {
  auto be = ops::make_cpu_backend(ops::BackendOptions{threads});
  const ops::AttentionShape shape{c.B, c.T, c.NH, c.NKV, c.hd};
  const size_t n_qkv = static_cast<size_t>(c.B) * c.T * shape.qkv_width();
  const size_t n_out = static_cast<size_t>(c.B) * c.T * shape.q_width();
  const auto qkv = ref::random_floats(n_qkv, 37, -2.0f, 2.0f);
  const auto dout = ref::random_floats(n_out, 38);
  const VecD qkv_d = ref::to_double(qkv), dout_d = ref::to_double(dout);
  VecD out_w(n_out), lse_w(static_cast<size_t>(c.B) * c.NH * c.T), dqkv_w(n_qkv);
  ref::gqa_forward(out_w.data(), lse_w.data(), qkv_d.data(), c.B, c.T, c.NH, c.NKV, c.hd);
  ref::gqa_backward(dqkv_w.data(), dout_d.data(), qkv_d.data(), out_w.data(), lse_w.data(), c.B,
                    c.T, c.NH, c.NKV, c.hd);
  INFO("B=" << c.B << " T=" << c.T << " NH=" << c.NH << " NKV=" << c.NKV << " hd=" << c.hd
            << " threads=" << threads);
  std::vector<float> out(n_out), lse(lse_w.size()), dqkv(n_qkv, 42.0f);
  be->attention_forward(out.data(), lse.data(), qkv.data(), shape);
  ref::require_close(out, out_w, 1e-4, "out");
  ref::require_close(lse, lse_w, 1e-4, "lse");
  be->attention_backward(dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(), shape);
  ref::require_close(dqkv, dqkv_w, 1e-4, "dqkv");
}

}  // namespace

TEST_CASE("grouped-query attention forward/backward match the reference", "[ops]") {
  const int threads = GENERATE(1, 2);
  check_gqa({2, 5, 4, 2, 4}, threads);
  check_gqa({1, 70, 6, 2, 16}, threads);  // group 3, several query blocks
  check_gqa({2, 33, 8, 1, 64}, threads);  // multi-query, the vectorised kernels' head size
  check_gqa({1, 17, 3, 3, 8}, threads);   // group 1 is multi-head attention
}

TEST_CASE("grouped-query attention backward is the same on one and two threads", "[ops]") {
  const ops::AttentionShape shape{3, 40, 8, 2, 16};
  const size_t n_qkv = size_t{3} * 40 * shape.qkv_width();
  const size_t n_out = size_t{3} * 40 * shape.q_width();
  const auto qkv = ref::random_floats(n_qkv, 39);
  const auto dout = ref::random_floats(n_out, 40);
  std::vector<std::vector<float>> grads;
  for (int threads : {1, 2}) {
    auto be = ops::make_cpu_backend(ops::BackendOptions{threads});
    std::vector<float> out(n_out), lse(size_t{3} * 8 * 40), dqkv(n_qkv);
    be->attention_forward(out.data(), lse.data(), qkv.data(), shape);
    be->attention_backward(dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(), shape);
    grads.push_back(dqkv);
  }
  REQUIRE(grads[0] == grads[1]);
}
