// The CUDA backend's attention and Llama-family kernels (their real source, rewritten by
// run.sh only where they launch) run on the host warp emulator of include/cuda_runtime.h,
// against the CPU backend and, for grouped-query attention, the naive double reference of
// tests/gpu/gqa_reference.h. For machines without a GPU: it checks indexing and formulas,
// not the GPU's code generation. Prints one line per comparison; exit status 1 on a miss.
#include <cstdio>
#include <random>
#include <string>
#include <tuple>

#include "gpu/gqa_reference.h"
#include "ops/cuda/kernels.h"

using namespace trainctl;
namespace cu = trainctl::ops::cuda;

namespace {

int failures = 0;

std::vector<float> random_vec(size_t n, unsigned seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// |got - want| <= atol + rtol |want| everywhere (the gpu tests' rule and tolerances).
void compare(const std::string& what, const std::vector<float>& got, const std::vector<float>& want,
             double rtol, double atol) {
  double worst = 0.0;
  bool ok = got.size() == want.size();
  for (size_t i = 0; ok && i < got.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - want[i]);
    const double allowed = atol + rtol * std::fabs(static_cast<double>(want[i]));
    if (!(err <= allowed)) ok = false;
    worst = std::max(worst, err / allowed);
  }
  std::printf("%-4s %-48s error / allowed %.3g\n", ok ? "ok" : "FAIL", what.c_str(), worst);
  if (!ok) ++failures;
}

void check_attention(ops::Backend& cpu) {
  struct Case {
    int B, T, n_head, n_kv_head, head_dim;
  };
  for (const Case c :
       {Case{2, 37, 4, 4, 64}, Case{2, 37, 4, 2, 32}, Case{1, 20, 8, 2, 64}, Case{2, 9, 4, 1, 128},
        Case{1, 1, 2, 1, 32}, Case{1, 11, 6, 3, 128}, Case{1, 5, 3, 1, 40}}) {
    const ops::AttentionShape s{c.B, c.T, c.n_head, c.n_kv_head, c.head_dim};
    const std::string tag = " B" + std::to_string(c.B) + " T" + std::to_string(c.T) + " heads " +
                            std::to_string(c.n_head) + "/" + std::to_string(c.n_kv_head) + " hd" +
                            std::to_string(c.head_dim);
    const auto qkv = random_vec(static_cast<size_t>(s.B) * s.T * s.qkv_width(), 1);
    const auto dout = random_vec(static_cast<size_t>(s.B) * s.T * s.q_width(), 2);
    const gpu_test::GqaReference want = gpu_test::gqa_reference(qkv, dout, s);
    std::vector<float> out(want.out.size()), lse(want.lse.size()), scratch(want.lse.size());
    std::vector<float> dqkv = random_vec(qkv.size(), 3);  // overwritten
    cu::launch_attention_forward(nullptr, out.data(), lse.data(), qkv.data(), s);
    cu::launch_attention_backward(nullptr, dqkv.data(), dout.data(), qkv.data(), out.data(),
                                  lse.data(), s, scratch.data());
    compare("attention out" + tag, out, want.out, 1e-4, 1e-5);
    compare("attention lse" + tag, lse, want.lse, 1e-5, 1e-5);
    compare("attention dqkv" + tag, dqkv, want.dqkv, 1e-3, 1e-5);
    if (s.n_kv_head == s.n_head) {
      std::vector<float> o(out.size()), l(lse.size()), d(qkv.size());
      cpu.attention_forward(o.data(), l.data(), qkv.data(), s);
      cpu.attention_backward(d.data(), dout.data(), qkv.data(), o.data(), l.data(), s);
      compare("attention out vs CPU backend" + tag, out, o, 1e-4, 1e-5);
      compare("attention dqkv vs CPU backend" + tag, dqkv, d, 1e-3, 1e-5);
    }
  }
}

void check_rmsnorm(ops::Backend& cpu) {
  for (const auto& [N, C, eps] :
       {std::tuple{300, 200, 1e-5f}, std::tuple{5, 1000, 1e-6f}, std::tuple{1, 7, 1e-5f}}) {
    const std::string tag = " N" + std::to_string(N) + " C" + std::to_string(C);
    const size_t n = static_cast<size_t>(N) * C;
    const auto x = random_vec(n, 4, -3, 3), w = random_vec(C, 5), dy = random_vec(n, 6);
    std::vector<float> out(n), rstd(N), dx(n), want(n), wrstd(N), wdx(n);
    auto dw = random_vec(C, 7), wdw = dw;  // accumulated into
    std::vector<float> partials(cu::rmsnorm_backward_partials(N, C));
    cu::launch_rmsnorm_forward(nullptr, out.data(), rstd.data(), x.data(), w.data(), N, C, eps);
    cu::launch_rmsnorm_backward(nullptr, dx.data(), dw.data(), dy.data(), x.data(), w.data(),
                                rstd.data(), N, C, partials.data());
    cpu.rmsnorm_forward(want.data(), wrstd.data(), x.data(), w.data(), N, C, eps);
    cpu.rmsnorm_backward(wdx.data(), wdw.data(), dy.data(), x.data(), w.data(), wrstd.data(), N, C);
    compare("rmsnorm out" + tag, out, want, 1e-4, 1e-5);
    compare("rmsnorm rstd" + tag, rstd, wrstd, 1e-4, 1e-6);
    compare("rmsnorm dinp" + tag, dx, wdx, 1e-4, 1e-5);
    compare("rmsnorm dweight" + tag, dw, wdw, 1e-4, 1e-4);
  }
}

void check_rope(ops::Backend& cpu) {
  struct Case {
    int B, T, n_head, n_kv_head, head_dim, pos0;
  };
  for (const Case c : {Case{2, 7, 4, 2, 64, 0}, Case{1, 5, 2, 1, 128, 1000},
                       Case{3, 3, 3, 3, 32, 13}, Case{1, 1, 1, 1, 2, 0}}) {
    const std::string tag = " hd" + std::to_string(c.head_dim) + " pos0 " + std::to_string(c.pos0);
    const int heads = c.n_head + c.n_kv_head, stride = (c.n_head + 2 * c.n_kv_head) * c.head_dim;
    const auto x = random_vec(static_cast<size_t>(c.B) * c.T * stride, 8, -2, 2);
    std::vector<float> got = x, want = x;
    cu::launch_rope_forward(nullptr, got.data(), c.B, c.T, stride, heads, c.head_dim, 1e4f, c.pos0);
    cpu.rope_forward(want.data(), c.B, c.T, stride, heads, c.head_dim, 1e4f, c.pos0);
    compare("rope forward" + tag, got, want, 1e-5, 1e-5);
    cu::launch_rope_backward(nullptr, got.data(), c.B, c.T, stride, heads, c.head_dim, 1e4f,
                             c.pos0);
    cpu.rope_backward(want.data(), c.B, c.T, stride, heads, c.head_dim, 1e4f, c.pos0);
    compare("rope backward" + tag, got, want, 1e-5, 1e-5);
  }
}

void check_swiglu(ops::Backend& cpu) {
  const int N = 33, H = 129;
  const size_t n = static_cast<size_t>(N) * H;
  const auto gu = random_vec(2 * n, 9, -6, 6), dy = random_vec(n, 10);
  std::vector<float> out(n), want(n), grad(2 * n), wgrad(2 * n);
  cu::launch_swiglu_forward(nullptr, out.data(), gu.data(), N, H);
  cu::launch_swiglu_backward(nullptr, grad.data(), dy.data(), gu.data(), N, H);
  cpu.swiglu_forward(want.data(), gu.data(), N, H);
  cpu.swiglu_backward(wgrad.data(), dy.data(), gu.data(), N, H);
  compare("swiglu forward", out, want, 1e-5, 1e-6);
  compare("swiglu backward", grad, wgrad, 1e-5, 1e-6);
}

}  // namespace

int main() {
  auto cpu = ops::make_cpu_backend({});
  check_attention(*cpu);
  check_rmsnorm(*cpu);
  check_rope(*cpu);
  check_swiglu(*cpu);
  std::printf(failures == 0 ? "all kernels agree\n" : "%d comparisons failed\n", failures);
  return failures == 0 ? 0 : 1;
}
