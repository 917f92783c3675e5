// The Llama-family CUDA ops against the CPU backend (RMSNorm, RoPE, SwiGLU), and
// grouped-query attention against a naive double-precision reference (gqa_reference.h:
// the CPU backend has multi-head attention only). Tolerances as test_cuda_ops.cpp:
// elementwise 1e-5 relative + 1e-6 absolute (fused multiply-adds, expf / cosf / sinf
// against the host's), reductions 1e-4 + 1e-5, attention gradients 1e-3 + 1e-5.
#include <cstring>

#include "gpu/gpu_support.h"
#include "gpu/gqa_reference.h"

using namespace trainctl;
using namespace trainctl::gpu_test;

TEST_CASE("rmsnorm forward and backward", "[gpu][llama][rmsnorm]") {
  Backends b;
  struct Case {
    int N, C;
    float eps;
  };
  for (const Case c : {Case{300, 200, 1e-5f}, Case{37, 4096, 1e-6f}, Case{1, 7, 1e-5f}}) {
    const std::string tag = " N=" + std::to_string(c.N) + " C=" + std::to_string(c.C);
    const size_t n = static_cast<size_t>(c.N) * c.C;
    const auto x = random_vec(n, 30, -3, 3), w = random_vec(c.C, 31), dout = random_vec(n, 32);
    DeviceVec dx(*b.cuda, x), dw(*b.cuda, w), ddout(*b.cuda, dout);
    DeviceVec out(*b.cuda, n), rstd(*b.cuda, c.N), dinp(*b.cuda, n);
    std::vector<float> want(n), wrstd(c.N), wdinp(n);
    b.cuda->rmsnorm_forward(out.get(), rstd.get(), dx.get(), dw.get(), c.N, c.C, c.eps);
    b.cpu->rmsnorm_forward(want.data(), wrstd.data(), x.data(), w.data(), c.N, c.C, c.eps);
    check_close(out.download(), want, 1e-4, 1e-5, "rmsnorm out" + tag);
    check_close(rstd.download(), wrstd, 1e-4, 1e-6, "rmsnorm rstd" + tag);
    auto gw0 = random_vec(c.C, 33);  // dweight accumulates onto an existing gradient
    DeviceVec gw(*b.cuda, gw0);
    b.cuda->rmsnorm_backward(dinp.get(), gw.get(), ddout.get(), dx.get(), dw.get(), rstd.get(), c.N,
                             c.C);
    b.cpu->rmsnorm_backward(wdinp.data(), gw0.data(), dout.data(), x.data(), w.data(), wrstd.data(),
                            c.N, c.C);
    check_close(dinp.download(), wdinp, 1e-4, 1e-5, "rmsnorm dinp" + tag);
    check_close(gw.download(), gw0, 1e-4, 1e-4, "rmsnorm dweight" + tag);
    // Deterministic: the same call again adds bit-identical amounts.
    const auto once = gw.download();
    DeviceVec gw2(*b.cuda, random_vec(c.C, 33));
    b.cuda->rmsnorm_backward(dinp.get(), gw2.get(), ddout.get(), dx.get(), dw.get(), rstd.get(),
                             c.N, c.C);
    check_close(gw2.download(), once, 0, 0, "rmsnorm dweight rerun" + tag);
  }
}

TEST_CASE("rope forward and backward in place, with a position offset", "[gpu][llama][rope]") {
  Backends b;
  struct Case {
    int B, T, n_head, n_kv_head, head_dim;
    float theta;
    int pos0;
  };
  for (const Case c : {Case{2, 37, 4, 2, 64, 10000.0f, 0}, Case{1, 5, 2, 1, 128, 500000.0f, 1000},
                       Case{3, 9, 3, 3, 32, 10000.0f, 7}, Case{1, 1, 1, 1, 2, 10000.0f, 0}}) {
    const std::string tag = " T=" + std::to_string(c.T) +
                            " head_dim=" + std::to_string(c.head_dim) +
                            " pos0=" + std::to_string(c.pos0);
    // The qkv layout: q and k heads rotate, v (the rest of the row) must stay untouched.
    const int heads = c.n_head + c.n_kv_head;
    const int stride = (c.n_head + 2 * c.n_kv_head) * c.head_dim;
    const size_t n = static_cast<size_t>(c.B) * c.T * stride;
    const auto x = random_vec(n, 34, -2, 2);
    DeviceVec dx(*b.cuda, x);
    std::vector<float> want = x;
    b.cuda->rope_forward(dx.get(), c.B, c.T, stride, heads, c.head_dim, c.theta, c.pos0);
    b.cpu->rope_forward(want.data(), c.B, c.T, stride, heads, c.head_dim, c.theta, c.pos0);
    const auto got = dx.download();
    check_close(got, want, 1e-5, 1e-5, "rope_forward" + tag);
    for (size_t row = 0; row < static_cast<size_t>(c.B) * c.T; ++row) {
      for (size_t i = static_cast<size_t>(heads) * c.head_dim; i < static_cast<size_t>(stride);
           ++i) {
        REQUIRE(got[row * stride + i] == x[row * stride + i]);
      }
    }
    b.cuda->rope_backward(dx.get(), c.B, c.T, stride, heads, c.head_dim, c.theta, c.pos0);
    b.cpu->rope_backward(want.data(), c.B, c.T, stride, heads, c.head_dim, c.theta, c.pos0);
    const auto back = dx.download();
    check_close(back, want, 1e-5, 1e-5, "rope_backward" + tag);
    check_close(back, x, 1e-5, 1e-5, "rope_backward undoes rope_forward" + tag);
  }
  float* none = nullptr;
  CHECK_THROWS_AS(b.cuda->rope_forward(none, 1, 1, 8, 1, 7, 10000.0f, 0), std::invalid_argument);
  CHECK_THROWS_AS(b.cuda->rope_forward(none, 1, 1, 8, 2, 8, 10000.0f, 0), std::invalid_argument);
}

TEST_CASE("swiglu forward and backward", "[gpu][llama][swiglu]") {
  Backends b;
  for (const auto& [N, H] : {std::pair{333, 517}, std::pair{1, 1}, std::pair{64, 2048}}) {
    const std::string tag = " N=" + std::to_string(N) + " H=" + std::to_string(H);
    const size_t n = static_cast<size_t>(N) * H;
    const auto gu = random_vec(2 * n, 35, -6, 6), dout = random_vec(n, 36);
    DeviceVec dgu(*b.cuda, gu), ddout(*b.cuda, dout), out(*b.cuda, n), dgrad(*b.cuda, 2 * n);
    std::vector<float> want(n), wgrad(2 * n);
    b.cuda->swiglu_forward(out.get(), dgu.get(), N, H);
    b.cpu->swiglu_forward(want.data(), gu.data(), N, H);
    check_close(out.download(), want, 1e-5, 1e-6, "swiglu_forward" + tag);
    b.cuda->swiglu_backward(dgrad.get(), ddout.get(), dgu.get(), N, H);
    b.cpu->swiglu_backward(wgrad.data(), dout.data(), gu.data(), N, H);
    check_close(dgrad.download(), wgrad, 1e-5, 1e-6, "swiglu_backward" + tag);
  }
}

namespace {

struct GqaCase {
  int B, T, n_head, n_kv_head, head_dim;
};

std::string describe(const GqaCase& c) {
  return " B=" + std::to_string(c.B) + " T=" + std::to_string(c.T) +
         " n_head=" + std::to_string(c.n_head) + " n_kv_head=" + std::to_string(c.n_kv_head) +
         " head_dim=" + std::to_string(c.head_dim);
}

constexpr GqaCase kGqaCases[] = {
    {2, 37, 4, 4, 64}, {2, 37, 4, 2, 32},  {1, 130, 8, 2, 64}, {2, 9, 4, 1, 128},
    {1, 1, 2, 1, 32},  {3, 17, 6, 3, 128}, {1, 64, 8, 8, 32},  {2, 33, 8, 2, 128},
};

}  // namespace

TEST_CASE("grouped-query attention against a naive reference", "[gpu][attention][gqa]") {
  Backends b;
  for (const GqaCase& c : kGqaCases) {
    const ops::AttentionShape s{c.B, c.T, c.n_head, c.n_kv_head, c.head_dim};
    const std::string tag = describe(c);
    const size_t nqkv = static_cast<size_t>(s.B) * s.T * s.qkv_width();
    const size_t nout = static_cast<size_t>(s.B) * s.T * s.q_width();
    const size_t nlse = static_cast<size_t>(s.B) * s.n_head * s.T;
    const auto qkv = random_vec(nqkv, 40), dout = random_vec(nout, 41);
    const GqaReference want = gqa_reference(qkv, dout, s);
    DeviceVec dqkv_in(*b.cuda, qkv), ddout(*b.cuda, dout);
    DeviceVec out(*b.cuda, nout), lse(*b.cuda, nlse);
    DeviceVec dqkv(*b.cuda, random_vec(nqkv, 42));  // overwritten, not accumulated
    b.cuda->attention_forward(out.get(), lse.get(), dqkv_in.get(), s);
    check_close(out.download(), want.out, 1e-4, 1e-5, "gqa out" + tag);
    check_close(lse.download(), want.lse, 1e-5, 1e-5, "gqa lse" + tag);
    b.cuda->attention_backward(dqkv.get(), ddout.get(), dqkv_in.get(), out.get(), lse.get(), s);
    const auto got = dqkv.download();
    check_close(got, want.dqkv, 1e-3, 1e-5, "gqa dqkv" + tag);
    // Deterministic: a second backward is bit-identical.
    DeviceVec again(*b.cuda, nqkv);
    b.cuda->attention_backward(again.get(), ddout.get(), dqkv_in.get(), out.get(), lse.get(), s);
    check_close(again.download(), got, 0, 0, "gqa dqkv rerun" + tag);
  }
}

TEST_CASE("grouped-query attention equals multi-head attention over copied k/v heads",
          "[gpu][attention][gqa]") {
  Backends b;
  for (const GqaCase& c : kGqaCases) {
    const ops::AttentionShape s{c.B, c.T, c.n_head, c.n_kv_head, c.head_dim};
    const ops::AttentionShape mha{c.B, c.T, c.n_head, c.n_head, c.head_dim};
    const std::string tag = describe(c);
    const size_t nqkv = static_cast<size_t>(s.B) * s.T * s.qkv_width();
    const size_t nwide = static_cast<size_t>(s.B) * s.T * mha.qkv_width();
    const size_t nout = static_cast<size_t>(s.B) * s.T * s.q_width();
    const size_t nlse = static_cast<size_t>(s.B) * s.n_head * s.T;
    const auto qkv = random_vec(nqkv, 43), dout = random_vec(nout, 44);
    const auto wide = expand_kv_heads(qkv, s);
    DeviceVec dq(*b.cuda, qkv), dw(*b.cuda, wide), ddout(*b.cuda, dout);
    DeviceVec out(*b.cuda, nout), lse(*b.cuda, nlse), wout(*b.cuda, nout), wlse(*b.cuda, nlse);
    DeviceVec dqkv(*b.cuda, nqkv), dwide(*b.cuda, nwide);
    b.cuda->attention_forward(out.get(), lse.get(), dq.get(), s);
    b.cuda->attention_forward(wout.get(), wlse.get(), dw.get(), mha);
    // The same products in the same order: bit-identical.
    check_close(out.download(), wout.download(), 0, 0, "gqa vs mha out" + tag);
    check_close(lse.download(), wlse.download(), 0, 0, "gqa vs mha lse" + tag);
    b.cuda->attention_backward(dqkv.get(), ddout.get(), dq.get(), out.get(), lse.get(), s);
    b.cuda->attention_backward(dwide.get(), ddout.get(), dw.get(), wout.get(), wlse.get(), mha);
    // Fold the multi-head k/v gradients back onto their shared heads (a sum over the group).
    const auto g = dwide.download();
    std::vector<float> folded(nqkv, 0.0f);
    const int hs = s.head_dim, C = s.q_width(), W = s.qkv_width();
    for (size_t row = 0; row < static_cast<size_t>(s.B) * s.T; ++row) {
      const float* src = g.data() + row * 3 * C;
      float* dst = folded.data() + row * W;
      std::copy(src, src + C, dst);
      for (int h = 0; h < s.n_head; ++h) {
        const int kh = h / s.group();
        for (int d = 0; d < hs; ++d) {
          dst[C + kh * hs + d] += src[C + h * hs + d];
          dst[C + s.kv_width() + kh * hs + d] += src[2 * C + h * hs + d];
        }
      }
    }
    check_close(dqkv.download(), folded, 1e-4, 1e-5, "gqa vs mha dqkv" + tag);
  }
}

TEST_CASE("attention rejects bad shapes", "[gpu][attention][gqa]") {
  Backends b;
  float* none = nullptr;
  CHECK_THROWS_AS(b.cuda->attention_forward(none, none, none, ops::AttentionShape{1, 4, 4, 3, 32}),
                  std::invalid_argument);
  CHECK_THROWS_AS(b.cuda->attention_forward(none, none, none, ops::AttentionShape{1, 4, 2, 1, 512}),
                  std::invalid_argument);
}
