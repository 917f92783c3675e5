#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <thread>
#include <vector>

#include "parallel/buckets.h"
#include "parallel/grad_comm.h"
#include "parallel/grad_sync.h"
#include "test_parallel_support.h"

namespace parallel = trainctl::parallel;
using parallel::Bucket;
using parallel::FloatRange;
using parallel::GradCommDType;
using parallel::GradSync;
using parallel::GradSyncOptions;
using parallel::testing::fake_grad;
using parallel::testing::on_dp_group;
using parallel::testing::RecordingComm;

namespace {

// Layers in backward order over a buffer of `sizes` laid out front to back (sizes[0] at
// offset 0 is the embeddings, reported last).
std::vector<FloatRange> layers_of(const std::vector<int64_t>& sizes) {
  std::vector<FloatRange> front_to_back;
  int64_t at = 0;
  for (int64_t s : sizes) {
    front_to_back.emplace_back(at, at + s);
    at += s;
  }
  return {front_to_back.rbegin(), front_to_back.rend()};
}

int64_t total_of(const std::vector<int64_t>& sizes) {
  int64_t t = 0;
  for (int64_t s : sizes) t += s;
  return t;
}

// One step of `micro_batches`; every micro-batch reports all layers in backward order.
void run_step(GradSync& sync, int layers, int micro_batches) {
  for (int m = 0; m < micro_batches; ++m) {
    sync.begin_micro_batch(m == micro_batches - 1);
    for (int l = 0; l < layers; ++l) sync.on_layer_ready(l);
  }
  sync.finish();
}

}  // namespace

TEST_CASE("plan_buckets groups whole layers in backward order", "[parallel]") {
  const auto layers = layers_of({40, 10, 10, 10, 10, 10});  // embeddings 40, five blocks of 10
  SECTION("capped by layer count") {
    const auto b =
        parallel::plan_buckets(layers, {.bucket_bytes = 1 << 20, .max_layers_per_bucket = 2});
    REQUIRE(b.size() == 3);
    CHECK(b[0].begin == 70);
    CHECK(b[0].end == 90);
    CHECK(b[0].first_layer == 0);
    CHECK(b[0].last_layer == 1);
    CHECK(b[1].begin == 50);
    CHECK(b[1].end == 70);
    CHECK(b[2].begin == 0);  // first block + embeddings
    CHECK(b[2].end == 50);
    CHECK(b[2].last_layer == 5);
  }
  SECTION("capped by bytes; a layer larger than the cap gets its own bucket") {
    const auto b =
        parallel::plan_buckets(layers, {.bucket_bytes = 25 * 4, .max_layers_per_bucket = 10});
    REQUIRE(b.size() == 4);
    CHECK(b[0].size() == 20);
    CHECK(b[1].size() == 20);
    CHECK(b[2].size() == 10);
    CHECK(b[3].size() == 40);
    CHECK(b[3].first_layer == 5);
  }
  SECTION("ranges must be adjacent and descending") {
    std::vector<FloatRange> gap = {{20, 30}, {0, 10}};
    CHECK_THROWS_AS(parallel::plan_buckets(gap, {}), std::invalid_argument);
    std::vector<FloatRange> ascending = {{0, 10}, {10, 20}};
    CHECK_THROWS_AS(parallel::plan_buckets(ascending, {}), std::invalid_argument);
    CHECK_THROWS_AS(parallel::plan_buckets(layers, {.max_layers_per_bucket = 0}),
                    std::invalid_argument);
  }
}

TEST_CASE("bf16 conversion rounds to nearest even and keeps NaN and inf", "[parallel]") {
  CHECK(parallel::from_bf16(parallel::to_bf16(1.0f)) == 1.0f);
  CHECK(parallel::from_bf16(parallel::to_bf16(-2.5f)) == -2.5f);
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1).
  CHECK(parallel::from_bf16(parallel::to_bf16(1.0f + 0x1p-8f)) == 1.0f);
  CHECK(parallel::from_bf16(parallel::to_bf16(1.0f + 3 * 0x1p-8f)) == 1.0f + 0x1p-6f);
  CHECK(std::isnan(parallel::from_bf16(parallel::to_bf16(std::nanf("")))));
  CHECK(std::isinf(parallel::from_bf16(parallel::to_bf16(INFINITY))));
  double worst = 0;
  for (int i = 0; i < 10000; ++i) {
    const float x = fake_grad(0, 0, i) * static_cast<float>(1 + i % 97);
    if (x == 0) continue;
    worst = std::max(worst, std::fabs(parallel::from_bf16(parallel::to_bf16(x)) - x) /
                                std::fabs(static_cast<double>(x)));
  }
  CHECK(worst <= 0x1p-8);
  CHECK(worst > 0x1p-10);  // it does round
  CHECK(parallel::parse_grad_comm_dtype("bf16") == GradCommDType::bf16);
  CHECK_THROWS_AS(parallel::parse_grad_comm_dtype("fp8"), std::invalid_argument);
}

TEST_CASE("GradSync reduces buckets in reverse layer order, only on the last micro-batch",
          "[parallel]") {
  const std::vector<int64_t> sizes = {40, 10, 10, 10, 10, 10};
  std::vector<float> grads(static_cast<size_t>(total_of(sizes)));
  RecordingComm comm(2, grads.data());
  GradSync sync(comm, grads.data(), layers_of(sizes),
                {.buckets = {.bucket_bytes = 1 << 20, .max_layers_per_bucket = 2}});
  REQUIRE(sync.buckets().size() == 3);

  SECTION("accumulation-only micro-batches send nothing") {
    for (int m = 0; m < 3; ++m) {
      sync.begin_micro_batch(false);
      for (int l = 0; l < 6; ++l) sync.on_layer_ready(l);
    }
    sync.finish();
    CHECK(comm.calls().empty());
    CHECK(sync.stats().collectives == 0);
  }
  SECTION("the last micro-batch sends every bucket once, last layers first") {
    run_step(sync, 6, 4);
    const auto calls = comm.calls();
    REQUIRE(calls.size() == 3);
    CHECK(calls[0] == std::make_pair(int64_t{70}, int64_t{20}));
    CHECK(calls[1] == std::make_pair(int64_t{50}, int64_t{20}));
    CHECK(calls[2] == std::make_pair(int64_t{0}, int64_t{50}));
    CHECK(sync.stats().collectives == 3);
    CHECK(sync.stats().wire_bytes == grads.size() * sizeof(float));
    // comm_bytes: a ring allreduce of each bucket sends 2 (n - 1) / n of its bytes.
    const size_t n = static_cast<size_t>(comm.size());
    CHECK(sync.stats().sent_bytes == (20 + 20 + 50) * sizeof(float) * 2 * (n - 1) / n);
    run_step(sync, 6, 1);  // and again next step
    CHECK(comm.calls().size() == 6);
  }
  SECTION("a bucket leaves as soon as its lowest layer is ready") {
    sync.begin_micro_batch(true);
    sync.on_layer_ready(0);
    sync.on_layer_ready(1);  // completes bucket 0
    for (int i = 0; i < 500 && comm.calls().empty(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    CHECK(comm.calls().size() == 1);  // before the rest of the backward pass
    for (int l = 2; l < 6; ++l) sync.on_layer_ready(l);
    sync.finish();
    CHECK(comm.calls().size() == 3);
  }
  SECTION("misuse is reported") {
    sync.begin_micro_batch(true);
    sync.on_layer_ready(0);
    CHECK_THROWS_AS(sync.on_layer_ready(0), std::logic_error);
    CHECK_THROWS_AS(sync.on_layer_ready(6), std::out_of_range);
    CHECK_THROWS_AS(sync.begin_micro_batch(false), std::logic_error);
    CHECK_THROWS_AS(sync.finish(), std::logic_error);  // layers 1..5 never reported
  }
}

TEST_CASE("GradSync hides communication behind compute and reports the exposed part",
          "[parallel]") {
  const std::vector<int64_t> sizes = {16, 16, 16, 16};
  std::vector<float> grads(static_cast<size_t>(total_of(sizes)));
  RecordingComm comm(2, grads.data());
  comm.sleep_ms = 30;
  GradSync sync(comm, grads.data(), layers_of(sizes), {.buckets = {.max_layers_per_bucket = 1}});
  sync.begin_micro_batch(true);
  for (int l = 0; l < 4; ++l) {
    sync.on_layer_ready(l);
    // "Backward" of the next layer: longer than one bucket's communication.
    std::this_thread::sleep_for(std::chrono::milliseconds(l < 3 ? 60 : 0));
  }
  sync.finish();
  const auto& s = sync.stats();
  CHECK(s.collectives == 4);
  CHECK(s.comm_s >= 0.11);
  // Only the last bucket (the embeddings) cannot overlap.
  CHECK(s.exposed_s < s.comm_s * 0.6);
}

TEST_CASE("GradSync passes a communication failure to finish()", "[parallel]") {
  const std::vector<int64_t> sizes = {8, 8, 8};
  std::vector<float> grads(static_cast<size_t>(total_of(sizes)));
  RecordingComm comm(2, grads.data());
  comm.fail_on = 0;
  GradSync sync(comm, grads.data(), layers_of(sizes), {.buckets = {.max_layers_per_bucket = 1}});
  CHECK_THROWS_AS(run_step(sync, 3, 1), trainctl::comm::CommError);
  CHECK(comm.calls().size() == 1);  // nothing more goes out on a broken group
  CHECK_THROWS_AS(run_step(sync, 3, 1), trainctl::comm::CommError);
}

TEST_CASE("GradSync sums gradients over real DP groups like one plain allreduce", "[parallel]") {
  // Uneven layers, one larger than the ring's small-message threshold.
  const std::vector<int64_t> sizes = {70001, 1000, 33, 5000, 17};
  const int64_t total = total_of(sizes);
  for (int n : {1, 2, 3}) {
    for (GradCommDType dtype : {GradCommDType::fp32, GradCommDType::bf16}) {
      DYNAMIC_SECTION("dp " << n << ", " << parallel::to_string(dtype)) {
        std::vector<std::vector<float>> got(static_cast<size_t>(n));
        std::vector<std::vector<float>> plain(static_cast<size_t>(n));
        on_dp_group(n, [&](trainctl::comm::Communicator& dp) {
          const int r = dp.rank();
          std::vector<float>& grads = got[static_cast<size_t>(r)];
          grads.resize(static_cast<size_t>(total));
          for (int64_t i = 0; i < total; ++i) grads[static_cast<size_t>(i)] = fake_grad(r, 0, i);
          plain[static_cast<size_t>(r)] = grads;
          {
            GradSync sync(dp, grads.data(), layers_of(sizes),
                          {.buckets = {.max_layers_per_bucket = 2}, .dtype = dtype});
            run_step(sync, static_cast<int>(sizes.size()), 2);
            if (n > 1 && sync.stats().collectives != 3) throw std::runtime_error("bucket count");
          }
          dp.allreduce(plain[static_cast<size_t>(r)].data(), static_cast<size_t>(total));
        });
        // Counted, not asserted per element: tens of thousands of assertions are slow.
        int64_t replica_mismatches = 0, plain_mismatches = 0;
        double worst_rel = 0;  // error / sum of |contributions|, the bound's unit
        for (int64_t i = 0; i < total; ++i) {
          const auto k = static_cast<size_t>(i);
          double exact = 0, magnitude = 0;
          for (int r = 0; r < n; ++r) {
            exact += fake_grad(r, 0, i);
            magnitude += std::fabs(fake_grad(r, 0, i));
          }
          for (int r = 1; r < n; ++r)
            replica_mismatches += got[static_cast<size_t>(r)][k] != got[0][k];
          if (dtype == GradCommDType::fp32) {
            // a + b has no order to differ in; three terms may be added in another order
            // (each result within 2 roundings of at most 2^-24 * magnitude of the exact sum).
            const double allowed = n <= 2 ? 0.0 : 4 * 0x1p-24 * magnitude;
            plain_mismatches += std::fabs(got[0][k] - plain[0][k]) > allowed;
          }
          if (magnitude > 0) {
            worst_rel = std::max(worst_rel, std::fabs(got[0][k] - exact) / magnitude);
          }
        }
        CHECK(replica_mismatches == 0);  // replicas stay bitwise in lock-step
        CHECK(plain_mismatches == 0);
        if (dtype == GradCommDType::bf16) {
          CHECK(worst_rel <= parallel::bf16_sum_error_bound(n));
          if (n > 1) CHECK(worst_rel > 0x1p-12);  // the test does see bf16 rounding
        } else {
          CHECK(worst_rel <= n * 0x1p-24);
        }
      }
    }
  }
}
