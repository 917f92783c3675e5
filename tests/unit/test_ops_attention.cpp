// Fused causal attention (CPU backend, fp32) against the naive double reference, plus the
// causal property itself.
#include "ops/backend.h"
#include "test_ops_reference.h"

namespace ops = trainctl::ops;
namespace ref = trainctl::ops::ref;
using ref::VecD;

namespace {

struct AttentionCase {
  int B, T, C, NH;
};

void check_against_reference(const AttentionCase& s, int threads) {
  auto be = ops::make_cpu_backend(ops::BackendOptions{threads});
  const int B = s.B, T = s.T, C = s.C, NH = s.NH;
  const auto qkv = ref::random_floats(static_cast<size_t>(B) * T * 3 * C, 81, -2.0f, 2.0f);
  const auto dout = ref::random_floats(static_cast<size_t>(B) * T * C, 82);
  const VecD qkv_d = ref::to_double(qkv), dout_d = ref::to_double(dout);
  VecD out_want(static_cast<size_t>(B) * T * C), lse_want(static_cast<size_t>(B) * NH * T);
  ref::attention_forward(out_want.data(), lse_want.data(), qkv_d.data(), B, T, C, NH);
  VecD dqkv_want(qkv.size());
  ref::attention_backward(dqkv_want.data(), dout_d.data(), qkv_d.data(), out_want.data(),
                          lse_want.data(), B, T, C, NH);

  std::vector<float> out(out_want.size()), lse(lse_want.size());
  be->attention_forward(out.data(), lse.data(), qkv.data(), B, T, C, NH);
  INFO("B=" << B << " T=" << T << " C=" << C << " NH=" << NH << " threads=" << threads);
  ref::require_close(out, out_want, 1e-4, "out");
  ref::require_close(lse, lse_want, 1e-4, "lse");
  std::vector<float> dqkv(qkv.size(), 42.0f);  // overwritten, not accumulated
  be->attention_backward(dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(), B, T, C, NH);
  ref::require_close(dqkv, dqkv_want, 1e-4, "dqkv");
}

}  // namespace

TEST_CASE("attention forward/backward match the reference", "[ops]") {
  const int threads = GENERATE(1, 2);
  // Small odd shapes, and T spanning several query blocks with a ragged last block.
  check_against_reference({2, 5, 12, 3}, threads);
  check_against_reference({1, 1, 8, 2}, threads);
  check_against_reference({2, 150, 16, 2}, threads);
  // The GPT models' head size 64 (the vectorised kernels' full tiles), a ragged T, and a
  // head size that is neither a multiple of 16 nor below 64.
  check_against_reference({1, 100, 128, 2}, threads);
  check_against_reference({1, 37, 200, 2}, threads);
}

TEST_CASE("attention is causal: output at t ignores inputs after t", "[ops]") {
  auto be = ops::make_cpu_backend(ops::BackendOptions{1});
  const int B = 1, T = 130, C = 16, NH = 2;
  auto qkv = ref::random_floats(static_cast<size_t>(B) * T * 3 * C, 91);
  std::vector<float> out1(static_cast<size_t>(T) * C), out2(out1.size()), lse(NH * T);
  be->attention_forward(out1.data(), lse.data(), qkv.data(), B, T, C, NH);
  const int cut = 70;
  for (size_t i = static_cast<size_t>(cut) * 3 * C; i < qkv.size(); ++i) qkv[i] = 100.0f;
  be->attention_forward(out2.data(), lse.data(), qkv.data(), B, T, C, NH);
  for (size_t i = 0; i < static_cast<size_t>(cut) * C; ++i) REQUIRE(out1[i] == out2[i]);
  bool changed_after = false;
  for (size_t i = static_cast<size_t>(cut) * C; i < out1.size(); ++i) {
    changed_after |= out1[i] != out2[i];
  }
  REQUIRE(changed_after);
}

TEST_CASE("attention rejects a head count that does not divide C", "[ops]") {
  auto be = ops::make_cpu_backend(ops::BackendOptions{1});
  std::vector<float> qkv(3 * 10), out(10), lse(3);
  REQUIRE_THROWS_AS(be->attention_forward(out.data(), lse.data(), qkv.data(), 1, 1, 10, 3),
                    std::invalid_argument);
}

TEST_CASE("attention over a key/value cache is the full attention's last row", "[ops]") {
  // Grouped-query (8 query heads on 2 k/v heads) and multi-head, on 1 and 2 threads.
  struct Case {
    int T, n_head, n_kv_head, head_dim, threads;
  };
  for (const Case c : {Case{1, 8, 2, 16, 1}, Case{19, 8, 2, 16, 2}, Case{33, 4, 4, 32, 1}}) {
    auto be = ops::make_cpu_backend(ops::BackendOptions{c.threads});
    const ops::AttentionShape shape{1, c.T, c.n_head, c.n_kv_head, c.head_dim};
    const int W = shape.qkv_width(), q_width = shape.q_width(), kv = shape.kv_width();
    const auto qkv = ref::random_floats(static_cast<size_t>(c.T) * W, 83, -2.0f, 2.0f);
    std::vector<float> out(static_cast<size_t>(c.T) * q_width);
    std::vector<float> lse(static_cast<size_t>(c.n_head) * c.T);
    be->attention_forward(out.data(), lse.data(), qkv.data(), shape);
    // The caches: each position's k and v heads, packed [T, kv].
    std::vector<float> k_cache(static_cast<size_t>(c.T) * kv), v_cache(k_cache.size());
    for (int t = 0; t < c.T; ++t) {
      const float* row = qkv.data() + static_cast<size_t>(t) * W;
      std::copy_n(row + q_width, kv, k_cache.data() + static_cast<size_t>(t) * kv);
      std::copy_n(row + q_width + kv, kv, v_cache.data() + static_cast<size_t>(t) * kv);
    }
    std::vector<float> got(static_cast<size_t>(q_width));
    be->attention_decode(got.data(), qkv.data() + static_cast<size_t>(c.T - 1) * W, k_cache.data(),
                         v_cache.data(), c.T, c.n_head, c.n_kv_head, c.head_dim);
    INFO("T=" << c.T << " heads " << c.n_head << "/" << c.n_kv_head);
    const float* want = out.data() + static_cast<size_t>(c.T - 1) * q_width;
    for (int i = 0; i < q_width; ++i) CHECK(got[i] == Approx(want[i]).margin(1e-5).epsilon(1e-5));
  }
  auto be = ops::make_cpu_backend({});
  std::vector<float> none(8);
  CHECK_THROWS_AS(
      be->attention_decode(none.data(), none.data(), none.data(), none.data(), 1, 3, 2, 4),
      std::invalid_argument);
  CHECK_THROWS_AS(
      be->attention_decode(none.data(), none.data(), none.data(), none.data(), 0, 2, 2, 4),
      std::invalid_argument);
}
