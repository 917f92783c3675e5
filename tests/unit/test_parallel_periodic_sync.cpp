// PeriodicSync (parallel.dp_sync local_sgd / diloco) on DP groups of threads, against
// references computed by hand: parameter averaging, DiLoCo's Nesterov outer step, when
// the replicas meet, what they send, and the outer state a checkpoint carries.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <vector>

#include "model/parameters.h"
#include "ops/backend.h"
#include "parallel/periodic_sync.h"
#include "test_parallel_support.h"

namespace parallel = trainctl::parallel;
namespace model = trainctl::model;
namespace ops = trainctl::ops;
using parallel::DpSyncMode;
using parallel::PeriodicSync;
using parallel::PeriodicSyncOptions;
using parallel::testing::fake_grad;

namespace {

void declare(model::ParameterSet& set) {
  set.declare("w", {5, 7}, model::Init::normal, 0.5f, true);
  set.declare("b", {3}, model::Init::normal, 0.5f, false);
  set.allocate();
  set.initialize(7);
}

// A replica's local update: parameters move by a rank-dependent amount.
void local_step(model::ParameterSet& set, int rank, int step) {
  for (const model::Param& p : set.list()) {
    for (int64_t i = p.offset; i < p.offset + p.numel; ++i) {
      set.data()[i] -= fake_grad(rank, step, i);
    }
  }
}

}  // namespace

TEST_CASE("parse_dp_sync_mode names the choices", "[parallel]") {
  CHECK(parallel::parse_dp_sync_mode("diloco") == DpSyncMode::diloco);
  CHECK(parallel::to_string(DpSyncMode::local_sgd) == "local_sgd");
  CHECK_THROWS_WITH(parallel::parse_dp_sync_mode("gossip"),
                    Catch::Contains("allreduce, local_sgd or diloco"));
}

TEST_CASE("local SGD averages the replicas every sync_every steps and at the end", "[parallel]") {
  const int n = 3, every = 2, steps = 5;
  std::vector<std::vector<float>> finals(n);
  std::vector<std::vector<size_t>> sent(n);
  parallel::testing::on_dp_group(n, [&](trainctl::comm::Communicator& dp) {
    auto backend = ops::make_cpu_backend({.threads = 1});
    model::ParameterSet set(*backend), ref(*backend);
    declare(set);
    declare(ref);
    PeriodicSync sync(dp, set, *backend, {.mode = DpSyncMode::local_sgd, .sync_every = every});
    const auto total = static_cast<size_t>(set.total());
    // Reference: every replica's local parameters, averaged at the meetings.
    std::vector<std::vector<float>> replicas(n, std::vector<float>(ref.data(), ref.data() + total));
    for (int step = 1; step <= steps; ++step) {
      local_step(set, dp.rank(), step);
      for (int q = 0; q < n; ++q) {
        for (const model::Param& p : ref.list()) {
          for (int64_t i = p.offset; i < p.offset + p.numel; ++i) {
            replicas[q][static_cast<size_t>(i)] -= fake_grad(q, step, i);
          }
        }
      }
      const bool met = sync.after_update(step, step == steps);
      CHECK(met == (step % every == 0 || step == steps));
      if (met) {
        for (size_t i = 0; i < total; ++i) {
          float sum = 0;
          for (int q = 0; q < n; ++q) sum += replicas[q][i];
          for (int q = 0; q < n; ++q) replicas[q][i] = sum / n;
        }
      }
      sent[dp.rank()].push_back(sync.stats().sent_bytes);
    }
    for (size_t i = 0; i < total; ++i) {
      CHECK(set.data()[i] == Approx(replicas[dp.rank()][i]).margin(1e-6));
    }
    finals[dp.rank()].assign(set.data(), set.data() + total);
  });
  CHECK(finals[0] == finals[1]);  // the same model on every replica, bit for bit
  CHECK(finals[1] == finals[2]);
  // Ring allreduce of the whole flat buffer: 2 (n - 1) / n of its bytes, on meeting steps.
  const size_t bytes = finals[0].size() * sizeof(float) * 2 * (n - 1) / n;
  CHECK(sent[0] == std::vector<size_t>{0, bytes, 0, bytes, bytes});
}

TEST_CASE("DiLoCo takes a Nesterov step on the averaged parameter change", "[parallel]") {
  const int n = 2, every = 3, steps = 6;
  const double lr = 0.7, mu = 0.9;
  std::vector<std::vector<float>> finals(n);
  parallel::testing::on_dp_group(n, [&](trainctl::comm::Communicator& dp) {
    auto backend = ops::make_cpu_backend({.threads = 1});
    model::ParameterSet set(*backend);
    declare(set);
    const auto total = static_cast<size_t>(set.total());
    const std::vector<float> start(set.data(), set.data() + total);
    PeriodicSync sync(
        dp, set, *backend,
        {.mode = DpSyncMode::diloco, .sync_every = every, .outer_lr = lr, .outer_momentum = mu});
    // Reference in double: θ_global, momentum, and each replica's local parameters.
    std::vector<double> global(start.begin(), start.end()), m(total, 0.0);
    std::vector<std::vector<double>> local(n, global);
    for (int step = 1; step <= steps; ++step) {
      local_step(set, dp.rank(), step);
      for (int q = 0; q < n; ++q) {
        for (const model::Param& p : set.list()) {
          for (int64_t i = p.offset; i < p.offset + p.numel; ++i) {
            local[q][static_cast<size_t>(i)] -= fake_grad(q, step, i);
          }
        }
      }
      if (sync.after_update(step, step == steps)) {
        for (size_t i = 0; i < total; ++i) {
          double delta = 0;
          for (int q = 0; q < n; ++q) delta += (global[i] - local[q][i]) / n;
          m[i] = mu * m[i] + delta;
          global[i] -= lr * (delta + mu * m[i]);
          for (int q = 0; q < n; ++q) local[q][i] = global[i];
        }
      }
    }
    for (size_t i = 0; i < total; ++i) CHECK(set.data()[i] == Approx(global[i]).margin(1e-5));
    // The outer state round-trips through save_outer / load_outer.
    const std::vector<parallel::FlatState> saved = sync.save_outer();
    REQUIRE(saved.size() == 2);
    CHECK(saved[0].name == "outer_params");
    CHECK(saved[1].name == "outer_momentum");
    for (size_t i = 0; i < total; ++i) CHECK(saved[1].values[i] == Approx(m[i]).margin(1e-5));
    sync.reset_outer();
    CHECK(sync.save_outer()[1].values == std::vector<float>(total, 0.0f));
    sync.load_outer(saved);
    CHECK(sync.save_outer()[0].values == saved[0].values);
    CHECK_THROWS(sync.load_outer({saved[0]}));
    finals[dp.rank()].assign(set.data(), set.data() + total);
  });
  CHECK(finals[0] == finals[1]);
}

TEST_CASE("PeriodicSync refuses allreduce and sync_every 0", "[parallel]") {
  parallel::testing::on_dp_group(1, [&](trainctl::comm::Communicator& dp) {
    auto backend = ops::make_cpu_backend({.threads = 1});
    model::ParameterSet set(*backend);
    declare(set);
    CHECK_THROWS_AS(PeriodicSync(dp, set, *backend, {.mode = DpSyncMode::allreduce}),
                    std::invalid_argument);
    CHECK_THROWS_AS(
        PeriodicSync(dp, set, *backend, {.mode = DpSyncMode::local_sgd, .sync_every = 0}),
        std::invalid_argument);
  });
}
