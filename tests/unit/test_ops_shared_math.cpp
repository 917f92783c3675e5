// The per-element formulas the CUDA kernels use (ops/shared_math.h), checked on the CPU
// against the CPU backend: a mistake in them would otherwise only show on a GPU.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "ops/backend.h"
#include "ops/cpu/float16.h"
#include "ops/shared_math.h"

using namespace trainctl;
namespace math = trainctl::ops::math;

namespace {

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

std::vector<float> random_floats(size_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

}  // namespace

TEST_CASE("shared gelu and its gradient match the CPU backend", "[ops][shared_math]") {
  auto be = ops::make_cpu_backend({.threads = 1});
  std::vector<float> x = random_floats(4096, -8.0f, 8.0f, 1);
  x.insert(x.end(), {0.0f, -0.0f, 1e-6f, -30.0f, 30.0f});
  const size_t n = x.size();
  std::vector<float> y(n), dx(n), ones(n, 1.0f);
  be->gelu_forward(y.data(), x.data(), n);
  be->gelu_backward(dx.data(), x.data(), ones.data(), n);
  for (size_t i = 0; i < n; ++i) {
    INFO("x = " << x[i]);
    CHECK(math::gelu(x[i]) == Approx(y[i]).epsilon(1e-5).margin(1e-6));
    CHECK(math::gelu_grad(x[i]) == Approx(dx[i]).epsilon(1e-5).margin(1e-6));
  }
}

TEST_CASE("shared gelu is GPT-2's tanh approximation", "[ops][shared_math]") {
  for (float x : {-3.0f, -1.0f, -0.25f, 0.0f, 0.5f, 2.0f, 5.0f}) {
    const double xd = x;
    const double ref =
        0.5 * xd * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (xd + 0.044715 * xd * xd * xd)));
    CHECK(math::gelu(x) == Approx(ref).epsilon(1e-6).margin(1e-7));
  }
}

TEST_CASE("shared AdamW update matches the CPU backend step for step", "[ops][shared_math]") {
  auto be = ops::make_cpu_backend({.threads = 1});
  const size_t n = 1000;  // not a multiple of 8: the CPU's vector and scalar tails both run
  std::vector<float> p = random_floats(n, -1, 1, 2), m(n, 0.0f), v(n, 0.0f);
  std::vector<float> p2 = p, m2 = m, v2 = v;
  for (int step = 1; step <= 5; ++step) {
    const std::vector<float> g = random_floats(n, -0.5f, 0.5f, 10 + step);
    be->adamw(p.data(), g.data(), m.data(), v.data(), n, 3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, step);
    const math::AdamWConstants k = math::adamw_constants(3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, step);
    for (size_t i = 0; i < n; ++i) math::adamw_update(p2[i], g[i], m2[i], v2[i], k);
  }
  for (size_t i = 0; i < n; ++i) {
    CHECK(p2[i] == Approx(p[i]).epsilon(1e-6).margin(1e-7));
    // m sums gradients of both signs (|g| <= 0.5): where it nearly cancels, one rounding
    // difference (e.g. the compiler fusing a multiply-add in one version and not the other
    // under -march=native) is large relative to m, so the margin scales with |g|, not |m|.
    CHECK(m2[i] == Approx(m[i]).epsilon(1e-6).margin(1e-7));
    CHECK(v2[i] == Approx(v[i]).epsilon(1e-6).margin(1e-12));
  }
}

TEST_CASE("shared 16-bit conversions are bit-identical to the CPU backend's",
          "[ops][shared_math]") {
  // Every 16-bit pattern widens identically.
  for (uint32_t h = 0; h <= 0xffffu; ++h) {
    const auto u = static_cast<uint16_t>(h);
    REQUIRE(bits(math::bf16_to_fp32(u)) == bits(ops::cpu::bf16_to_fp32(u)));
    REQUIRE(bits(math::fp16_to_fp32(u)) == bits(ops::cpu::fp16_to_fp32(u)));
  }
  // Narrowing: random bit patterns (all exponents, NaNs, subnormals) and the edge cases.
  std::mt19937 rng(3);
  std::vector<float> xs;
  for (int i = 0; i < 200000; ++i) {
    const uint32_t u = rng();
    float f;
    std::memcpy(&f, &u, sizeof f);
    xs.push_back(f);
  }
  xs.insert(xs.end(),
            {0.0f, -0.0f, 65504.0f, 65520.0f, 65536.0f, 6.1e-5f, 5.96e-8f, 2.98e-8f,
             std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
             std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::denorm_min()});
  for (float f : xs) {
    INFO("bits " << bits(f));
    REQUIRE(math::fp32_to_bf16(f) == ops::cpu::fp32_to_bf16(f));
    REQUIRE(math::fp32_to_fp16(f) == ops::cpu::fp32_to_fp16(f));
  }
}
