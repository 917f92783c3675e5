// PowerSGD (parallel.grad_compression: powersgd) on DP groups of threads: at full rank it is
// the uncompressed sum; at low rank nothing is lost (what is not sent waits in the error
// feedback), vectors travel exactly, every rank gets the same result, it sends (n + m) r
// floats per matrix, and its state round-trips for checkpoints.
#include <catch2/catch.hpp>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "parallel/powersgd.h"
#include "test_parallel_support.h"

namespace parallel = trainctl::parallel;
using parallel::Bucket;
using parallel::GradMatrix;
using parallel::PowerSgd;
using parallel::testing::fake_grad;

namespace {

// A 12 × 5 matrix, a 7-float vector, a 6 × 9 matrix: one bucket over all 121 floats.
const std::vector<GradMatrix> kMatrices = {{0, 12, 5, 1}, {67, 6, 9, 2}};
constexpr int64_t kTotal = 121;
const Bucket kBucket{0, kTotal, 0, 0};

float grad(int rank, int step, int64_t i) {
  // Columns of different scale so low-rank approximations are not accidentally exact.
  return fake_grad(rank, step, i) * static_cast<float>(1 + i % 5);
}

}  // namespace

TEST_CASE("PowerSGD at full rank equals the uncompressed sum", "[parallel][powersgd]") {
  const int n = 3, steps = 3;
  parallel::testing::on_dp_group(n, [&](trainctl::comm::Communicator& dp) {
    PowerSgd p(dp, kMatrices, {.rank = 64, .seed = 1, .only_when_smaller = false});
    CHECK(p.rank_of(0) == 5);
    CHECK(p.rank_of(1) == 6);
    for (int step = 0; step < steps; ++step) {
      std::vector<float> g(kTotal), want(kTotal, 0.0f);
      for (int64_t i = 0; i < kTotal; ++i) {
        g[static_cast<size_t>(i)] = grad(dp.rank(), step, i);
        for (int q = 0; q < n; ++q) want[static_cast<size_t>(i)] += grad(q, step, i);
      }
      p.reduce_bucket(g.data(), kBucket);
      for (int64_t i = 0; i < kTotal; ++i) {
        CHECK(g[static_cast<size_t>(i)] == Approx(want[static_cast<size_t>(i)]).margin(1e-5));
      }
    }
  });
}

TEST_CASE("PowerSGD at low rank keeps what it does not send in the error feedback",
          "[parallel][powersgd]") {
  const int n = 2, steps = 4;
  std::vector<std::vector<float>> results(n);
  parallel::testing::on_dp_group(n, [&](trainctl::comm::Communicator& dp) {
    PowerSgd p(dp, kMatrices, {.rank = 2, .seed = 1});
    REQUIRE(p.compressed(0));  // (12 + 5) 2 < 60
    REQUIRE(p.compressed(1));  // (6 + 9) 2 < 54
    std::vector<float> sent_total(kTotal, 0.0f), grad_total(kTotal, 0.0f);
    for (int step = 0; step < steps; ++step) {
      std::vector<float> g(kTotal);
      for (int64_t i = 0; i < kTotal; ++i) {
        g[static_cast<size_t>(i)] = grad(dp.rank(), step, i);
        for (int q = 0; q < n; ++q) grad_total[static_cast<size_t>(i)] += grad(q, step, i);
      }
      const parallel::StepCommStats s = p.reduce_bucket(g.data(), kBucket);
      // P of both matrices, then Q of both with the 7-float vector: a ring allreduce at n = 2
      // sends each byte once.
      CHECK(s.sent_bytes == ((12 + 6) * 2 + (5 * 2 + 9 * 2 + 7)) * sizeof(float));
      for (int64_t i = 0; i < kTotal; ++i)
        sent_total[static_cast<size_t>(i)] += g[static_cast<size_t>(i)];
      // The vector is summed exactly.
      for (int64_t i = 60; i < 67; ++i) {
        CHECK(g[static_cast<size_t>(i)] == grad(0, step, i) + grad(1, step, i));
      }
    }
    // Everything sent plus everything still held back (summed over ranks) is every gradient.
    std::vector<float> err = p.error(kTotal);
    dp.allreduce(err.data(), err.size());
    double off = 0, scale = 0;
    for (int64_t i = 0; i < kTotal; ++i) {
      const auto k = static_cast<size_t>(i);
      off = std::max(off, static_cast<double>(std::fabs(sent_total[k] + err[k] - grad_total[k])));
      scale = std::max(scale, static_cast<double>(std::fabs(grad_total[k])));
    }
    CHECK(off <= 1e-5 * scale);
    CHECK(scale > 0);
    // ... and the rank-2 result is not the exact sum (something was held back).
    double held = 0;
    for (float e : err) held = std::max(held, static_cast<double>(std::fabs(e)));
    CHECK(held > 1e-4 * scale);
    results[static_cast<size_t>(dp.rank())] = sent_total;
  });
  CHECK(results[0] == results[1]);  // every rank applies the same gradient
}

TEST_CASE("PowerSGD sends small matrices as they are and restores its state",
          "[parallel][powersgd]") {
  parallel::testing::on_dp_group(2, [&](trainctl::comm::Communicator& dp) {
    // Rank 4 on 12 × 5: (12 + 5) 4 >= 60, so it is summed exactly; 6 × 9 at rank 2 is not.
    PowerSgd p(dp, {{0, 12, 5, 1}}, {.rank = 4, .seed = 1});
    CHECK_FALSE(p.compressed(0));
    PowerSgd a(dp, kMatrices, {.rank = 2, .seed = 7});
    std::vector<float> g(kTotal);
    for (int64_t i = 0; i < kTotal; ++i) g[static_cast<size_t>(i)] = grad(dp.rank(), 0, i);
    std::vector<float> g2 = g;
    a.reduce_bucket(g.data(), kBucket);
    // A fresh compressor loaded with a's state continues exactly as a does.
    PowerSgd b(dp, kMatrices, {.rank = 2, .seed = 99});
    b.load(a.error(kTotal), a.q());
    for (int64_t i = 0; i < kTotal; ++i) {
      g[static_cast<size_t>(i)] = grad(dp.rank(), 1, i);
      g2[static_cast<size_t>(i)] = g[static_cast<size_t>(i)];
    }
    a.reduce_bucket(g.data(), kBucket);
    b.reduce_bucket(g2.data(), kBucket);
    CHECK(g == g2);
    CHECK_THROWS_AS(b.load(a.error(kTotal), {}), std::invalid_argument);
    CHECK_THROWS_AS(PowerSgd(dp, kMatrices, {.rank = 0}), std::invalid_argument);
  });
}

TEST_CASE("PowerSGD warm-up: which steps compress, and a negative warm-up is refused",
          "[parallel][powersgd]") {
  parallel::testing::on_dp_group(1, [&](trainctl::comm::Communicator& dp) {
    const PowerSgd none(dp, kMatrices, {.rank = 2, .seed = 1});
    CHECK(none.compresses_at(0));
    const PowerSgd warm(dp, kMatrices, {.rank = 2, .seed = 1, .warmup_steps = 3});
    CHECK(warm.warmup_steps() == 3);
    CHECK_FALSE(warm.compresses_at(0));
    CHECK_FALSE(warm.compresses_at(2));
    CHECK(warm.compresses_at(3));
    // The state a compressed step starts from is the one it would have at step 0.
    CHECK(warm.q() == none.q());
    CHECK(warm.error(kTotal) == std::vector<float>(kTotal, 0.0f));
    CHECK_THROWS_AS(PowerSgd(dp, kMatrices, {.rank = 2, .warmup_steps = -1}),
                    std::invalid_argument);
  });
}
