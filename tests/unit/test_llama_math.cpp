// The Llama-family per-element formulas the CUDA kernels use (ops/llama_math.h), checked
// on the CPU against the CPU backend, including the CUDA RoPE kernel's decomposition of a
// flat pair index into (row, head, i), so a mistake shows up on machines without a GPU.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <vector>

#include "ops/backend.h"
#include "ops/llama_math.h"

using namespace trainctl;
namespace math = trainctl::ops::math;

namespace {

std::vector<float> random_floats(size_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// Agreement to a few units in the last place: the CPU backend's loops may be compiled with
// contracted multiply-adds where these inline functions are not, or the other way round.
void check_near(const std::vector<float>& got, const std::vector<float>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << " got " << got[i] << " want " << want[i]);
    REQUIRE(std::fabs(got[i] - want[i]) <= 1e-6f * (1.0f + std::fabs(want[i])));
  }
}

// rope_kernel's loop (kernels_llama.cu) run on the host: pair k -> (i, head, row) with i
// fastest, sign +1 forward and -1 backward.
void rope_as_kernel(std::vector<float>& x, int B, int T, int row_stride, int heads, int head_dim,
                    float theta, int pos0, float sign) {
  const int half = head_dim / 2;
  std::vector<float> inv(static_cast<size_t>(half));
  for (int i = 0; i < half; ++i)
    inv[static_cast<size_t>(i)] = math::rope_inv_freq(i, head_dim, theta);
  const int64_t pairs = int64_t{B} * T * heads * half;
  for (int64_t k = 0; k < pairs; ++k) {
    const int i = static_cast<int>(k % half);
    const int64_t rh = k / half;
    const int h = static_cast<int>(rh % heads);
    const int64_t row = rh / heads;
    const float pos = static_cast<float>(pos0 + static_cast<int>(row % T));
    const float angle = pos * inv[static_cast<size_t>(i)];
    const float c = std::cos(angle), s = sign * std::sin(angle);
    float* v = x.data() + row * row_stride + static_cast<int64_t>(h) * head_dim;
    const float a = v[i], b = v[i + half];
    v[i] = math::rope_first(a, b, c, s);
    v[i + half] = math::rope_second(a, b, c, s);
  }
}

}  // namespace

TEST_CASE("shared swiglu and its gradients match the CPU backend", "[ops][llama_math]") {
  auto be = ops::make_cpu_backend({.threads = 1});
  const int N = 17, H = 129;
  const size_t n = static_cast<size_t>(N) * H;
  auto gu = random_floats(2 * n, -12.0f, 12.0f, 1);
  gu[0] = 0.0f;
  gu[1] = -90.0f;  // exp(-g) overflows to inf: silu -> -0, its gradient -> 0
  gu[2] = 90.0f;
  const auto dy = random_floats(n, -1.0f, 1.0f, 2);
  std::vector<float> want(n), wgrad(2 * n), got(n), grad(2 * n);
  be->swiglu_forward(want.data(), gu.data(), N, H);
  be->swiglu_backward(wgrad.data(), dy.data(), gu.data(), N, H);
  for (int r = 0; r < N; ++r) {
    for (int i = 0; i < H; ++i) {
      const size_t k = static_cast<size_t>(r) * H + i;
      const float g = gu[static_cast<size_t>(r) * 2 * H + i];
      const float u = gu[static_cast<size_t>(r) * 2 * H + H + i];
      got[k] = math::swiglu(g, u);
      math::swiglu_grad(g, u, dy[k], &grad[static_cast<size_t>(r) * 2 * H + i],
                        &grad[static_cast<size_t>(r) * 2 * H + H + i]);
    }
  }
  check_near(got, want);
  check_near(grad, wgrad);
  for (float v : grad) REQUIRE(std::isfinite(v));
}

TEST_CASE("the CUDA RoPE kernel's indexing and formulas match the CPU backend",
          "[ops][llama_math]") {
  auto be = ops::make_cpu_backend({.threads = 1});
  struct Case {
    int B, T, n_head, n_kv_head, head_dim;
    float theta;
    int pos0;
  };
  for (const Case c : {Case{2, 7, 4, 2, 16, 10000.0f, 0}, Case{1, 5, 2, 1, 128, 500000.0f, 1000},
                       Case{3, 3, 3, 3, 2, 10000.0f, 7}}) {
    const int heads = c.n_head + c.n_kv_head;
    const int stride = (c.n_head + 2 * c.n_kv_head) * c.head_dim;
    const auto x = random_floats(static_cast<size_t>(c.B) * c.T * stride, -2.0f, 2.0f, 3);
    for (float sign : {1.0f, -1.0f}) {
      std::vector<float> got = x, want = x;
      rope_as_kernel(got, c.B, c.T, stride, heads, c.head_dim, c.theta, c.pos0, sign);
      if (sign > 0) {
        be->rope_forward(want.data(), c.B, c.T, stride, heads, c.head_dim, c.theta, c.pos0);
      } else {
        be->rope_backward(want.data(), c.B, c.T, stride, heads, c.head_dim, c.theta, c.pos0);
      }
      check_near(got, want);
    }
  }
}

TEST_CASE("rope inverse frequencies follow Hugging Face's formula", "[ops][llama_math]") {
  // inv_freq = 1 / theta^(arange(0, dim, 2) / dim) in fp32.
  CHECK(math::rope_inv_freq(0, 64, 10000.0f) == 1.0f);
  CHECK(math::rope_inv_freq(16, 64, 10000.0f) == Approx(0.01f).epsilon(1e-6));
  CHECK(math::rope_inv_freq(1, 4, 10000.0f) == Approx(0.01f).epsilon(1e-6));
}
