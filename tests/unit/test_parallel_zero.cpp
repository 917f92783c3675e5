#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <vector>

#include "model/parameters.h"
#include "ops/backend.h"
#include "optim/optimizer.h"
#include "parallel/shard_layout.h"
#include "parallel/zero_optimizer.h"
#include "test_parallel_support.h"

namespace parallel = trainctl::parallel;
namespace model = trainctl::model;
namespace ops = trainctl::ops;
namespace optim = trainctl::optim;
using parallel::testing::fake_grad;

namespace {

// Two weights (decayed) around a bias (not decayed), with sizes that leave alignment
// gaps and make shard boundaries cut through the weights.
void declare(model::ParameterSet& set, int first_weight_rows) {
  set.declare("w1", {first_weight_rows, 10}, model::Init::normal, 0.5f, true);
  set.declare("b1", {7}, model::Init::normal, 0.5f, false);
  set.declare("w2", {3, 11}, model::Init::normal, 0.5f, true);
  set.allocate();
  set.initialize(99);
}

struct RankResult {
  std::vector<float> params;
  std::vector<double> norms;
  size_t state_bytes = 0;
  parallel::ShardLayout layout;
};

}  // namespace

TEST_CASE("ShardLayout pads to whole aligned shards", "[parallel]") {
  const auto l = parallel::make_shard_layout(176, 3);
  CHECK(l.shard_size == 64);
  CHECK(l.begin(2) == 128);
  CHECK(l.end(2) == 176);
  CHECK(l.padded());
  const auto tiny = parallel::make_shard_layout(16, 4);  // more ranks than lines
  CHECK(tiny.begin(3) == 16);
  CHECK(tiny.end(3) == 16);
  CHECK_FALSE(parallel::make_shard_layout(160, 2).padded());
}

TEST_CASE("ZeRO-1/2 AdamW steps equal plain AdamW on the summed gradient", "[parallel]") {
  const optim::OptimizerOptions adamw{
      .type = "adamw", .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1};
  const double max_norm = 0.05;  // small enough that clipping is active
  const int steps = 3;
  for (int rows : {10, 9}) {  // 176 floats (padded at dp 2 and 3) and 160 (not at dp 2)
    for (int n : {2, 3}) {
      for (int stage : {1, 2}) {
        DYNAMIC_SECTION(rows * 10 << "-float first weight, dp " << n << ", stage " << stage) {
          std::vector<RankResult> got(static_cast<size_t>(n));
          std::vector<RankResult> want(static_cast<size_t>(n));
          parallel::testing::on_dp_group(n, [&](trainctl::comm::Communicator& dp) {
            const int r = dp.rank();
            auto backend = ops::make_cpu_backend({.threads = 1});
            model::ParameterSet sharded(*backend), reference(*backend);
            declare(sharded, rows);
            declare(reference, rows);
            parallel::ZeroAdamW zero(dp, sharded, *backend, adamw, stage);
            auto plain = optim::make_optimizer(adamw, reference, *backend);
            const int64_t total = sharded.total();
            RankResult& g = got[static_cast<size_t>(r)];
            RankResult& w = want[static_cast<size_t>(r)];
            for (int step = 0; step < steps; ++step) {
              // Reference: the whole summed gradient (rank order) and an unsharded AdamW.
              for (int64_t i = 0; i < total; ++i) {
                float sum = 0;
                for (int q = 0; q < n; ++q) sum += fake_grad(q, step, i);
                reference.grads()[i] = sum;
                sharded.grads()[i] = fake_grad(r, step, i);
              }
              const double ref_norm = optim::grad_norm(reference, *backend);
              optim::clip_grad_norm(reference, *backend, ref_norm, max_norm);
              plain->step(1e-2);
              w.norms.push_back(ref_norm);

              // Stage 1 gets an already summed buffer (what GradSync leaves behind).
              if (stage == 1) dp.allreduce(sharded.grads(), static_cast<size_t>(total));
              zero.reduce_gradients();
              const double norm = zero.grad_norm();
              zero.clip_grad_norm(norm, max_norm);
              zero.step(1e-2);
              g.norms.push_back(norm);
            }
            g.params.assign(sharded.data(), sharded.data() + total);
            w.params.assign(reference.data(), reference.data() + total);
            g.state_bytes = zero.state_bytes();
            w.state_bytes = plain->state_bytes();
            g.layout = zero.layout();
          });
          const auto& layout = got[0].layout;
          if (rows == 10) CHECK(layout.padded());
          if (rows == 9 && n == 2) CHECK_FALSE(layout.padded());
          for (int r = 0; r < n; ++r) {
            const auto& g = got[static_cast<size_t>(r)];
            const auto& w = want[static_cast<size_t>(r)];
            CHECK(g.params == got[0].params);  // every rank holds the same model
            int64_t far = 0;
            for (size_t i = 0; i < g.params.size(); ++i)
              far += std::fabs(g.params[i] - w.params[i]) > 1e-6;
            CHECK(far == 0);
            for (int s = 0; s < steps; ++s) {
              CHECK(g.norms[static_cast<size_t>(s)] ==
                    Approx(w.norms[static_cast<size_t>(s)]).epsilon(1e-6));
              CHECK(w.norms[static_cast<size_t>(s)] > max_norm);
            }
            // Optimizer state: 2 floats per owned element, about 1/dp of the unsharded one.
            CHECK(g.state_bytes == 2 * sizeof(float) * static_cast<size_t>(layout.shard_size));
            CHECK(static_cast<double>(g.state_bytes) * n <
                  static_cast<double>(w.state_bytes) + 2 * sizeof(float) * 16.0 * n);
            CHECK(static_cast<double>(g.state_bytes) * n >= static_cast<double>(w.state_bytes));
          }
        }
      }
    }
  }
}

TEST_CASE("ZeroAdamW refuses what it cannot shard", "[parallel]") {
  auto backend = ops::make_cpu_backend({.threads = 1});
  model::ParameterSet set(*backend);
  declare(set, 2);
  parallel::testing::on_dp_group(1, [&](trainctl::comm::Communicator& dp) {
    CHECK_THROWS_AS(parallel::ZeroAdamW(dp, set, *backend, {.type = "sgd"}, 1),
                    std::invalid_argument);
    CHECK_THROWS_AS(parallel::ZeroAdamW(dp, set, *backend, {}, 3), std::invalid_argument);
    // A one-rank group owns everything: a plain AdamW.
    parallel::ZeroAdamW zero(dp, set, *backend, {}, 2);
    CHECK(zero.shard_begin() == 0);
    CHECK(zero.shard_end() == set.total());
  });
}

TEST_CASE("optimizer state round-trips, and ZeRO's whole state equals plain AdamW's",
          "[parallel]") {
  const optim::OptimizerOptions adamw{
      .type = "adamw", .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1};
  const int n = 3;
  parallel::testing::on_dp_group(n, [&](trainctl::comm::Communicator& dp) {
    auto backend = ops::make_cpu_backend({.threads = 1});
    model::ParameterSet sharded(*backend), reference(*backend), resumed(*backend);
    declare(sharded, 10);
    declare(reference, 10);
    declare(resumed, 10);
    parallel::ZeroAdamW zero(dp, sharded, *backend, adamw, 1);
    auto plain = optim::make_optimizer(adamw, reference, *backend);
    const int64_t total = sharded.total();
    auto set_grads = [&](model::ParameterSet& set, int step) {
      for (int64_t i = 0; i < total; ++i) set.grads()[i] = fake_grad(0, step, i);
    };
    for (int step = 0; step < 2; ++step) {
      set_grads(sharded, step);
      set_grads(reference, step);
      zero.step(1e-2);
      plain->step(1e-2);
    }
    const optim::OptimizerState whole = zero.save_state();
    const optim::OptimizerState want = plain->save_state();
    if (whole.step != 2 || whole.names != want.names || whole.buffers != want.buffers) {
      throw std::runtime_error("ZeRO's gathered state differs from plain AdamW's");
    }
    // A fresh ZeRO optimizer loaded with the state continues exactly as the original.
    std::copy(sharded.data(), sharded.data() + total, resumed.data());
    parallel::ZeroAdamW again(dp, resumed, *backend, adamw, 1);
    again.load_state(whole);
    set_grads(sharded, 2);
    set_grads(resumed, 2);
    zero.step(1e-2);
    again.step(1e-2);
    if (!std::equal(sharded.data(), sharded.data() + total, resumed.data())) {
      throw std::runtime_error("resumed optimizer diverged");
    }
    optim::OptimizerState wrong = whole;
    wrong.buffers[0].pop_back();
    bool refused = false;
    try {
      again.load_state(wrong);
    } catch (const std::invalid_argument&) {
      refused = true;
    }
    if (!refused) throw std::runtime_error("a state of the wrong size was accepted");
  });
  SUCCEED("checked on every rank");
}
