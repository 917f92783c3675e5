// AdamW against hand-computed PyTorch steps, and the dtype casts (exact values, ties,
// subnormals, inf and NaN).
#include <bit>
#include <cmath>
#include <limits>

#include "ops/backend.h"
#include "test_ops_reference.h"

namespace ops = trainctl::ops;
using trainctl::DType;

TEST_CASE("adamw: one element, two steps, by hand", "[ops]") {
  auto be = ops::make_cpu_backend(ops::BackendOptions{1});
  float p = 1.0f, m = 0.0f, v = 0.0f;
  float g = 0.5f;
  be->adamw(&p, &g, &m, &v, 1, 0.1f, 0.9f, 0.999f, 1e-8f, 0.01f, 1);
  // p = 1*(1 - 0.1*0.01) - 0.1 * (0.05/0.1) / (sqrt(0.00025/0.001) + 1e-8)
  // fp32 rounding of 1 - beta2 = 0.001 alone is 5e-5 relative: tolerances are 1e-4 for
  // the moments and 1e-5 for the parameter.
  REQUIRE(m == Approx(0.05).epsilon(1e-6));
  REQUIRE(v == Approx(0.00025).epsilon(1e-4));
  const double p1 = 0.999 - 0.1 * 0.5 / (0.5 + 1e-8);
  REQUIRE(p == Approx(p1).epsilon(1e-5));
  g = -0.25f;
  be->adamw(&p, &g, &m, &v, 1, 0.1f, 0.9f, 0.999f, 1e-8f, 0.01f, 2);
  const double m2 = 0.9 * 0.05 - 0.1 * 0.25, v2 = 0.999 * 0.00025 + 0.001 * 0.0625;
  const double p2 = p1 * 0.999 - 0.1 * (m2 / (1 - 0.81)) / (std::sqrt(v2 / (1 - 0.998001)) + 1e-8);
  REQUIRE(m == Approx(m2).epsilon(1e-6));
  REQUIRE(v == Approx(v2).epsilon(1e-4));
  REQUIRE(p == Approx(p2).epsilon(1e-5));
}

TEST_CASE("adamw on many elements matches PyTorch's formula in double", "[ops]") {
  const int threads = GENERATE(1, 2);
  auto be = ops::make_cpu_backend(ops::BackendOptions{threads});
  const size_t n = 100003;
  auto p = trainctl::ops::ref::random_floats(n, 111);
  auto m = trainctl::ops::ref::random_floats(n, 112, -0.1f, 0.1f);
  auto v = trainctl::ops::ref::random_floats(n, 113, 0.0f, 0.01f);
  const auto g = trainctl::ops::ref::random_floats(n, 114);
  const double lr = 3e-3, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1;
  const int step = 7;
  std::vector<double> pw(n), mw(n), vw(n);
  for (size_t i = 0; i < n; ++i) {
    mw[i] = b1 * m[i] + (1 - b1) * g[i];
    vw[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
    const double mhat = mw[i] / (1 - std::pow(b1, step));
    const double vhat = vw[i] / (1 - std::pow(b2, step));
    pw[i] = p[i] * (1 - lr * wd) - lr * mhat / (std::sqrt(vhat) + eps);
  }
  be->adamw(p.data(), g.data(), m.data(), v.data(), n, static_cast<float>(lr),
            static_cast<float>(b1), static_cast<float>(b2), static_cast<float>(eps),
            static_cast<float>(wd), step);
  trainctl::ops::ref::require_close(p, pw, 1e-5, "param");
  trainctl::ops::ref::require_close(m, mw, 1e-5, "m");
  trainctl::ops::ref::require_close(v, vw, 1e-5, "v");
  REQUIRE_THROWS_AS(
      be->adamw(p.data(), g.data(), m.data(), v.data(), n, 0.1f, 0.9f, 0.9f, 1e-8f, 0.0f, 0),
      std::invalid_argument);
}

namespace {

uint16_t to16(ops::Backend& be, float f, DType t) {
  uint16_t h = 0;
  be.cast(&h, t, &f, DType::fp32, 1);
  return h;
}

float from16(ops::Backend& be, uint16_t h, DType t) {
  float f = 0.0f;
  be.cast(&f, DType::fp32, &h, t, 1);
  return f;
}

}  // namespace

TEST_CASE("cast fp32 <-> bf16: exact values, ties to even, inf and NaN", "[ops]") {
  auto be = ops::make_cpu_backend(ops::BackendOptions{1});
  const DType bf = DType::bf16;
  REQUIRE(to16(*be, 1.0f, bf) == 0x3F80);
  REQUIRE(to16(*be, -2.0f, bf) == 0xC000);
  REQUIRE(to16(*be, 1.0f + 0x1p-8f, bf) == 0x3F80);             // tie -> even (down)
  REQUIRE(to16(*be, 1.0f + 3 * 0x1p-8f, bf) == 0x3F82);         // tie -> even (up)
  REQUIRE(to16(*be, 1.0f + 0x1p-8f + 0x1p-20f, bf) == 0x3F81);  // above the tie
  REQUIRE(to16(*be, std::numeric_limits<float>::infinity(), bf) == 0x7F80);
  REQUIRE(to16(*be, -std::numeric_limits<float>::infinity(), bf) == 0xFF80);
  REQUIRE(to16(*be, std::numeric_limits<float>::max(), bf) == 0x7F80);  // rounds to inf
  REQUIRE(std::isnan(from16(*be, to16(*be, std::numeric_limits<float>::quiet_NaN(), bf), bf)));
  // A NaN whose payload sits only in the low bits must not become inf.
  REQUIRE(std::isnan(from16(*be, to16(*be, std::bit_cast<float>(0x7F800001u), bf), bf)));
  REQUIRE(from16(*be, 0x3F80, bf) == 1.0f);
  REQUIRE(from16(*be, 0x4049, bf) == 3.140625f);
  REQUIRE(std::isinf(from16(*be, 0xFF80, bf)));
}

TEST_CASE("cast fp32 <-> fp16: exact values, ties, subnormals, overflow, inf and NaN", "[ops]") {
  auto be = ops::make_cpu_backend(ops::BackendOptions{1});
  const DType h = DType::fp16;
  REQUIRE(to16(*be, 1.0f, h) == 0x3C00);
  REQUIRE(to16(*be, -2.0f, h) == 0xC000);
  REQUIRE(to16(*be, 65504.0f, h) == 0x7BFF);
  REQUIRE(to16(*be, 65519.0f, h) == 0x7BFF);
  REQUIRE(to16(*be, 65520.0f, h) == 0x7C00);  // the tie above the largest half rounds to inf
  REQUIRE(to16(*be, 1e10f, h) == 0x7C00);
  REQUIRE(to16(*be, 1.0f + 0x1p-11f, h) == 0x3C00);      // tie -> even (down)
  REQUIRE(to16(*be, 1.0f + 3 * 0x1p-11f, h) == 0x3C02);  // tie -> even (up)
  REQUIRE(to16(*be, 0x1p-24f, h) == 0x0001);             // smallest subnormal
  REQUIRE(to16(*be, 0x1p-25f, h) == 0x0000);             // tie -> even (zero)
  REQUIRE(to16(*be, 3 * 0x1p-25f, h) == 0x0002);         // tie -> even (up)
  REQUIRE(to16(*be, 0x1p-14f, h) == 0x0400);             // smallest normal
  REQUIRE(to16(*be, -0.0f, h) == 0x8000);
  REQUIRE(to16(*be, 1e-10f, h) == 0x0000);
  REQUIRE(to16(*be, std::numeric_limits<float>::infinity(), h) == 0x7C00);
  REQUIRE(to16(*be, -std::numeric_limits<float>::infinity(), h) == 0xFC00);
  REQUIRE(std::isnan(from16(*be, to16(*be, std::numeric_limits<float>::quiet_NaN(), h), h)));
  REQUIRE(from16(*be, 0x0001, h) == 0x1p-24f);
  REQUIRE(from16(*be, 0x03FF, h) == 1023 * 0x1p-24f);
  REQUIRE(from16(*be, 0x3555, h) == 0.333251953125f);
  REQUIRE(std::isinf(from16(*be, 0x7C00, h)));
  REQUIRE(from16(*be, 0xFC00, h) < 0.0f);
  REQUIRE(std::isnan(from16(*be, 0x7E00, h)));
  REQUIRE(std::signbit(from16(*be, 0x8000, h)));

  // Every finite half survives fp16 -> fp32 -> fp16 unchanged (vectors, 2 threads).
  auto be2 = ops::make_cpu_backend(ops::BackendOptions{2});
  std::vector<uint16_t> all(65536), back(65536);
  std::vector<float> wide(65536);
  for (uint32_t i = 0; i < 65536; ++i) all[i] = static_cast<uint16_t>(i);
  be2->cast(wide.data(), DType::fp32, all.data(), h, all.size());
  be2->cast(back.data(), h, wide.data(), DType::fp32, all.size());
  for (uint32_t i = 0; i < 65536; ++i) {
    if ((i & 0x7C00) == 0x7C00 && (i & 0x03FF) != 0) {
      REQUIRE(std::isnan(wide[i]));
    } else {
      REQUIRE(back[i] == all[i]);
    }
  }
}

TEST_CASE("cast bf16 <-> fp16 goes through fp32, same-type cast copies", "[ops]") {
  auto be = ops::make_cpu_backend(ops::BackendOptions{1});
  const std::vector<uint16_t> bf = {0x3F80, 0xC000, 0x3EAB, 0x7F80};  // 1, -2, ~0.334, inf
  std::vector<uint16_t> half(bf.size()), bf_back(bf.size());
  be->cast(half.data(), DType::fp16, bf.data(), DType::bf16, bf.size());
  REQUIRE(half[0] == 0x3C00);
  REQUIRE(half[1] == 0xC000);
  REQUIRE(half[2] == 0x3558);  // 0.333984375 is exact in fp16
  REQUIRE(half[3] == 0x7C00);
  be->cast(bf_back.data(), DType::bf16, half.data(), DType::fp16, half.size());
  REQUIRE(bf_back == bf);
  std::vector<uint16_t> copy(bf.size());
  be->cast(copy.data(), DType::bf16, bf.data(), DType::bf16, bf.size());
  REQUIRE(copy == bf);
}
