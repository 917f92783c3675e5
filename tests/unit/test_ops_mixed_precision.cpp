// Mixed-precision matrix products (BackendOptions::matmul) on the CPU backend: with bf16
// or fp16, every product must equal the fp32 product of operands rounded to that type
// (bitwise: the backend runs the same fp32 sgemm on the rounded copies), the bias
// gradient must still sum the unrounded gradient, and the rounding must really happen
// (results differ from fp32 by about the type's precision).
#include <cmath>

#include "ops/backend.h"
#include "ops/cpu/float16.h"
#include "test_ops_reference.h"

namespace ops = trainctl::ops;
namespace ref = trainctl::ops::ref;
using trainctl::DType;

namespace {

std::unique_ptr<ops::Backend> backend(DType matmul, int threads = 2) {
  return ops::make_cpu_backend(ops::BackendOptions{.threads = threads, .matmul = matmul});
}

std::vector<float> rounded(DType type, std::vector<float> v) {
  for (float& x : v) {
    x = type == DType::bf16 ? ops::cpu::bf16_to_fp32(ops::cpu::fp32_to_bf16(x))
                            : ops::cpu::fp16_to_fp32(ops::cpu::fp32_to_fp16(x));
  }
  return v;
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float m = 0.0f;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

// Unit roundoff of the type: the relative error one rounding may introduce.
double unit_roundoff(DType type) { return type == DType::bf16 ? 0x1p-8 : 0x1p-11; }

}  // namespace

TEST_CASE("mixed gemm equals fp32 gemm of rounded operands, strided operands included",
          "[ops][mixed]") {
  const DType type = GENERATE(DType::bf16, DType::fp16);
  auto mixed = backend(type);
  auto fp32 = backend(DType::fp32);
  REQUIRE(mixed->matmul_dtype() == type);
  const int M = 70, N = 90, K = 150;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const int lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 5, ldc = N + 2;
      // Exactly the strided region the product reads (no padding after the last row), so
      // a rounding pass that reads past it is caught by AddressSanitizer.
      const auto a = ref::random_floats(size_t(ta ? K - 1 : M - 1) * lda + (ta ? M : K), 31);
      const auto b = ref::random_floats(size_t(tb ? N - 1 : K - 1) * ldb + (tb ? K : N), 32);
      const auto c0 = ref::random_floats(size_t(M) * ldc, 33);
      auto got = c0, want = c0, plain = c0;
      mixed->gemm(ta, tb, M, N, K, 0.5f, a.data(), lda, b.data(), ldb, -1.5f, got.data(), ldc);
      const auto ar = rounded(type, a), br = rounded(type, b);
      fp32->gemm(ta, tb, M, N, K, 0.5f, ar.data(), lda, br.data(), ldb, -1.5f, want.data(), ldc);
      fp32->gemm(ta, tb, M, N, K, 0.5f, a.data(), lda, b.data(), ldb, -1.5f, plain.data(), ldc);
      INFO("trans_a=" << ta << " trans_b=" << tb);
      REQUIRE(got == want);
      // The rounding shows: errors of order u * sqrt(K) * |a||b|, far above fp32's.
      const float diff = max_abs_diff(got, plain);
      CHECK(diff > unit_roundoff(type) * 0.05);
      CHECK(diff < unit_roundoff(type) * 0.5 * K);
    }
  }
}

TEST_CASE("mixed linear forward/backward round the product operands, not the bias sums",
          "[ops][mixed]") {
  const DType type = GENERATE(DType::bf16, DType::fp16);
  auto mixed = backend(type);
  auto fp32 = backend(DType::fp32);
  const int N = 48, IC = 40, OC = 24;
  const auto inp = ref::random_floats(size_t(N) * IC, 41);
  const auto w = ref::random_floats(size_t(OC) * IC, 42);
  const auto bias = ref::random_floats(size_t(OC), 43);
  const auto dout = ref::random_floats(size_t(N) * OC, 44, -1e-3f, 1e-3f);
  const auto inp_r = rounded(type, inp), w_r = rounded(type, w), dout_r = rounded(type, dout);

  std::vector<float> out(size_t(N) * OC), want(out.size());
  mixed->linear_forward(out.data(), inp.data(), w.data(), bias.data(), N, IC, OC);
  fp32->linear_forward(want.data(), inp_r.data(), w_r.data(), bias.data(), N, IC, OC);
  REQUIRE(out == want);

  std::vector<float> dinp(size_t(N) * IC), dw(size_t(OC) * IC, 0.25f), db(size_t(OC), 0.5f);
  auto dinp_want = dinp, dw_want = dw, db_want = db;
  mixed->linear_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(), N,
                         IC, OC);
  // Products from the rounded operands...
  fp32->linear_backward(dinp_want.data(), dw_want.data(), nullptr, dout_r.data(), inp_r.data(),
                        w_r.data(), N, IC, OC);
  // ...and the bias gradient from the unrounded dout.
  fp32->linear_backward(nullptr, std::vector<float>(dw.size()).data(), db_want.data(), dout.data(),
                        inp.data(), w.data(), N, IC, OC);
  REQUIRE(dinp == dinp_want);
  REQUIRE(dw == dw_want);
  REQUIRE(db == db_want);
}

TEST_CASE("mixed LM head: logits from rounded operands, gradients through rounded softmax grads",
          "[ops][mixed]") {
  const DType type = GENERATE(DType::bf16, DType::fp16);
  auto mixed = backend(type);
  auto fp32 = backend(DType::fp32);
  const int N = 40, C = 24, V = 97;
  const auto x = ref::random_floats(size_t(N) * C, 51);
  const auto wte = ref::random_floats(size_t(V) * C, 52);
  std::vector<int32_t> targets(N);
  for (int i = 0; i < N; ++i) targets[size_t(i)] = (i * 37) % V;
  targets[3] = -1;
  const auto x_r = rounded(type, x), wte_r = rounded(type, wte);

  std::vector<float> loss(N), loss_want(N);
  mixed->lm_head_cross_entropy(loss.data(), nullptr, nullptr, x.data(), wte.data(), targets.data(),
                               N, C, V, 0.0f);
  fp32->lm_head_cross_entropy(loss_want.data(), nullptr, nullptr, x_r.data(), wte_r.data(),
                              targets.data(), N, C, V, 0.0f);
  REQUIRE(loss == loss_want);

  // Backward: the double reference from the rounded operands bounds the rounding of the
  // softmax gradient (one more rounding of a value <= dloss) within a few unit roundoffs.
  std::vector<float> dx(size_t(N) * C), dw(size_t(V) * C, 0.0f);
  const float dloss = 1.0f / N;
  mixed->lm_head_cross_entropy(loss.data(), dx.data(), dw.data(), x.data(), wte.data(),
                               targets.data(), N, C, V, dloss);
  ref::VecD lw(N), dxw(dx.size()), dww(dw.size(), 0.0);
  const ref::VecD xd = ref::to_double(x_r), wd = ref::to_double(wte_r);
  ref::lm_head_cross_entropy(lw.data(), dxw.data(), dww.data(), xd.data(), wd.data(),
                             targets.data(), N, C, V, double(dloss));
  ref::require_close(dx, dxw, 4 * unit_roundoff(type), "dx");
  ref::require_close(dw, dww, 4 * unit_roundoff(type), "dwte");
  for (int c = 0; c < C; ++c) REQUIRE(dx[size_t(3 * C + c)] == 0.0f);  // ignored row
}

TEST_CASE("an operand noted as already rounded is read in place: the same product, no copy",
          "[ops][mixed]") {
  const DType type = GENERATE(DType::bf16, DType::fp16);
  const int N = 32, IC = 24, OC = 16;
  const auto inp = ref::random_floats(size_t(N) * IC, 51);
  const auto w = ref::random_floats(size_t(OC) * IC, 52);
  const auto w_r = rounded(type, w);
  std::vector<float> want(size_t(N) * OC), out(want.size());
  backend(type)->linear_forward(want.data(), inp.data(), w_r.data(), nullptr, N, IC, OC);
  // Representable weights in a noted buffer: bitwise the product that rounds them.
  auto noted = backend(type);
  std::vector<float> weights = w_r;
  noted->note_matmul_exact(weights.data(), weights.size());
  noted->linear_forward(out.data(), inp.data(), weights.data(), nullptr, N, IC, OC);
  CHECK(out == want);
  // The promise is taken at its word: unrounded values there are not rounded (so the fast
  // path is the one that ran), while the input operand still is.
  weights = w;
  noted->linear_forward(out.data(), inp.data(), weights.data(), nullptr, N, IC, OC);
  std::vector<float> unrounded_weights(out.size());
  backend(DType::fp32)
      ->linear_forward(unrounded_weights.data(), rounded(type, inp).data(), w.data(), nullptr, N,
                       IC, OC);
  CHECK(out == unrounded_weights);
  CHECK(out != want);
  // Forgotten, the buffer's operands are rounded again.
  noted->forget_matmul_exact(weights.data());
  noted->linear_forward(out.data(), inp.data(), weights.data(), nullptr, N, IC, OC);
  CHECK(out == want);
}
