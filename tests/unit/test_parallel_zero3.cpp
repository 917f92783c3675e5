#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "model/gpt.h"
#include "ops/backend.h"
#include "parallel/data_parallel.h"
#include "parallel/zero3_params.h"
#include "test_parallel_support.h"

namespace parallel = trainctl::parallel;
namespace model = trainctl::model;
namespace ops = trainctl::ops;

namespace {

const model::ModelConfig kConfig{
    .vocab_size = 64, .max_seq_len = 16, .n_layer = 3, .n_head = 2, .d_model = 32};

struct Run {
  std::vector<double> losses;
  std::vector<float> params;  // whole, after the last step
  int64_t tensor_floats = 0;  // parameters + gradients + optimizer state held by the rank
};

// The tiny GPT for `steps` steps on a global batch of 8 sequences over `dp_size` ranks
// (micro-batches of 2 sequences: gradient accumulation within a rank).
std::vector<Run> train(int dp_size, int zero, model::Recompute recompute, int steps) {
  const int B = 2, T = 16, global = 8;
  const int accum = global / B / dp_size;
  std::vector<Run> results(static_cast<size_t>(dp_size));
  parallel::testing::on_dp_group(dp_size, [&](trainctl::comm::Communicator& dp) {
    Run& out = results[static_cast<size_t>(dp.rank())];
    auto backend = ops::make_cpu_backend({.threads = 1});
    model::GptOptions options;
    options.recompute = recompute;
    options.unbound_params = zero == 3;
    model::Gpt gpt(kConfig, *backend, B, T, options);
    parallel::DataParallelOptions dp_options;
    dp_options.zero_stage = zero;
    parallel::DataParallel ddp(dp, gpt, *backend, {.type = "adamw", .weight_decay = 0.1},
                               dp_options);
    if (zero == 3) {
      ddp.zero3()->init_weights(3);
      ddp.zero3()->refresh();
    } else {
      gpt.init_weights(3);
    }
    std::vector<int32_t> tokens(B * T), targets(B * T);
    for (int step = 0; step < steps; ++step) {
      gpt.params().zero_grads();
      ddp.begin_step(step);
      double loss = 0;
      for (int m = 0; m < accum; ++m) {
        const int first_seq = (dp.rank() * accum + m) * B;
        parallel::testing::fill_sequences(tokens, targets, B, T, first_seq, step);
        int64_t count = 0;
        ddp.begin_micro_batch(m == accum - 1);
        loss += gpt.forward_backward(tokens.data(), targets.data(), 1.0f / (global * T), &count);
      }
      ddp.reduce_gradients();
      float loss_f = static_cast<float>(loss);
      dp.allreduce(&loss_f, 1);
      out.losses.push_back(loss_f / (global * T));
      ddp.clip_grad_norm(ddp.grad_norm(), 1.0);
      ddp.step(3e-3);
    }
    if (zero == 3) {
      out.params = ddp.zero3()->gather_flat();
      const auto m = parallel::zero3_memory_floats(ddp.zero3()->units());
      out.tensor_floats = 4 * m.shard;  // shards of 4 kinds: nothing else persists
    } else {
      out.params.assign(gpt.params().data(), gpt.params().data() + gpt.params().total());
      out.tensor_floats = 2 * gpt.params().total() +
                          static_cast<int64_t>(ddp.optimizer_state_bytes() / sizeof(float));
    }
  });
  return results;
}

}  // namespace

TEST_CASE("ZeRO-3 at dp 2 and 4 reproduces dp 1, with and without recomputation",
          "[parallel][zero3]") {
  const int steps = 3;
  const Run reference = train(1, 0, model::Recompute::none, steps)[0];
  for (const int dp : {2, 4}) {
    for (const auto recompute : {model::Recompute::none, model::Recompute::full}) {
      DYNAMIC_SECTION("dp " << dp << ", recompute " << model::to_string(recompute)) {
        const auto got = train(dp, 3, recompute, steps);
        for (const Run& r : got) {
          CHECK(r.params == got[0].params);  // every rank gathers the same model
          for (int s = 0; s < steps; ++s) {
            CHECK(r.losses[static_cast<size_t>(s)] ==
                  Approx(reference.losses[static_cast<size_t>(s)]).epsilon(2e-5));
          }
          REQUIRE(r.params.size() == reference.params.size());
          double worst = 0;
          for (size_t i = 0; i < r.params.size(); ++i) {
            worst = std::max(worst, double(std::fabs(r.params[i] - reference.params[i])));
          }
          CHECK(worst < 1e-5);
          // Persistent model state: the shards (params, grads, moments) of every unit,
          // the embedding and head included: ~1/dp of the replicated model's (padding
          // only above it).
          CHECK(static_cast<double>(r.tensor_floats) <
                1.03 / dp * static_cast<double>(reference.tensor_floats));
        }
      }
    }
  }
}

TEST_CASE("ZeRO-3 units cover the flat layout once, blocks on their own", "[parallel][zero3]") {
  auto backend = ops::make_cpu_backend({.threads = 1});
  model::GptOptions options;
  options.unbound_params = true;
  model::Gpt gpt(kConfig, *backend, 1, 16, options);
  const auto units = parallel::zero3_units(model::gpt_param_specs(kConfig, gpt.shard()), 3);
  int64_t pos = 0;
  int blocks = 0, resident = 0;
  for (const auto& u : units) {
    CHECK(u.begin == pos);
    pos = u.end;
    CHECK(u.layout.padded_total() >= u.end - u.begin);
    if (!u.resident) CHECK(u.block == blocks++);
    if (u.resident) ++resident;
  }
  CHECK(pos == gpt.params().total());
  CHECK(blocks == kConfig.n_layer);
  // wte and wpe each on their own (gathered around each use), ln_f's weight and bias together.
  CHECK(resident == 3);
  CHECK(units.front().end == gpt.params().find("transformer.wpe.weight").offset);
}

TEST_CASE("zero3_memory_floats is what ZeRO-3 allocates", "[parallel][zero3]") {
  parallel::testing::on_dp_group(2, [&](trainctl::comm::Communicator& dp) {
    auto backend = ops::make_cpu_backend({.threads = 1});
    model::GptOptions options;
    options.unbound_params = true;
    model::Gpt gpt(kConfig, *backend, 2, 16, options);
    const size_t before = backend->peak_allocated_bytes();  // nothing is freed in between
    parallel::DataParallelOptions dp_options;
    dp_options.zero_stage = 3;
    parallel::DataParallel ddp(dp, gpt, *backend, {.type = "adamw", .weight_decay = 0.1},
                               dp_options);
    const auto m = parallel::zero3_memory_floats(
        parallel::zero3_units(model::gpt_param_specs(kConfig, gpt.shard()), dp.size()));
    // Parameter and gradient shards, AdamW's two moments, the transient buffers.
    const int64_t floats = 4 * m.shard + m.transient;
    CHECK(backend->peak_allocated_bytes() - before == static_cast<size_t>(floats) * sizeof(float));
    CHECK(gpt.params().data() == nullptr);  // no whole flat buffer anywhere
  });
}
