// The mixed-precision layout (parallel/mixed_params.h): 16-bit weights that are always the
// fp32 master rounded, layouts that agree with each other, and the bytes it allocates.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "model/gpt.h"
#include "ops/backend.h"
#include "parallel/data_parallel.h"
#include "parallel/mixed_params.h"
#include "test_parallel_support.h"

namespace parallel = trainctl::parallel;
namespace model = trainctl::model;
namespace ops = trainctl::ops;
using trainctl::DType;

namespace {

const model::ModelConfig kConfig{
    .vocab_size = 64, .max_seq_len = 16, .n_layer = 3, .n_head = 2, .d_model = 32};

struct Run {
  std::vector<double> losses;
  std::vector<float> master;  // whole, after the last step
  // After a final evaluation pass: the head's weights as the model read them (widened from
  // 16 bits) and as the master holds them.
  std::vector<float> head_read, head_master;
};

// The tiny GPT for `steps` AdamW steps on 8 sequences over `dp_size` ranks, with matrix
// products in `compute`; `mixed`: the mixed-precision layout (else fp32 storage).
std::vector<Run> train(int dp_size, int zero, DType compute, bool mixed, int steps) {
  const int B = 2, T = 16, global = 8;
  const int accum = global / B / dp_size;
  std::vector<Run> results(static_cast<size_t>(dp_size));
  parallel::testing::on_dp_group(dp_size, [&](trainctl::comm::Communicator& dp) {
    Run& out = results[static_cast<size_t>(dp.rank())];
    auto backend = ops::make_cpu_backend({.threads = 1, .matmul = compute});
    model::GptOptions options;
    options.grads_only = mixed;
    model::Gpt gpt(kConfig, *backend, B, T, options);
    parallel::DataParallelOptions dp_options;
    dp_options.zero_stage = zero;
    dp_options.weights = mixed ? compute : DType::fp32;
    parallel::DataParallel ddp(dp, gpt, *backend, {.type = "adamw", .weight_decay = 0.1},
                               dp_options);
    if (mixed) {
      ddp.mixed()->init_weights(3);
    } else {
      gpt.init_weights(3);
    }
    std::vector<int32_t> tokens(B * T), targets(B * T);
    for (int step = 0; step < steps; ++step) {
      gpt.params().zero_grads();
      ddp.begin_step(step);
      double loss = 0;
      for (int m = 0; m < accum; ++m) {
        parallel::testing::fill_sequences(tokens, targets, B, T, (dp.rank() * accum + m) * B, step);
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
    const model::ParameterSet& params = gpt.params();
    if (!mixed) {
      out.master.assign(params.data(), params.data() + params.total());
      return;
    }
    out.master = ddp.mixed()->gather_master();
    // The head's use widens the tied embedding last: read it as the model sees it.
    parallel::testing::fill_sequences(tokens, targets, B, T, 0, steps);
    int64_t count = 0;
    gpt.forward_loss(tokens.data(), targets.data(), &count);
    const model::Param& wte = params.at(static_cast<size_t>(gpt.head_weight()));
    const float* read = params.data(static_cast<size_t>(gpt.head_weight()));
    out.head_read.assign(read, read + wte.numel);
    out.head_master.assign(out.master.begin() + wte.offset,
                           out.master.begin() + wte.offset + wte.numel);
  });
  return results;
}

float round_to(DType type, float x) {
  auto backend = ops::make_cpu_backend({.threads = 1});
  uint16_t half = 0;
  float back = 0;
  backend->cast(&half, type, &x, DType::fp32, 1);
  backend->cast(&back, DType::fp32, &half, type, 1);
  return back;
}

double worst_difference(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, double(std::fabs(a[i] - b[i])));
  return worst;
}

}  // namespace

TEST_CASE("mixed precision: the model reads its master weights rounded, every layout agrees",
          "[parallel][mixed]") {
  const int steps = 3;
  for (const DType compute : {DType::bf16, DType::fp16}) {
    DYNAMIC_SECTION(trainctl::dtype_name(compute)) {
      const Run one = train(1, 0, compute, true, steps)[0];
      // The weights the model reads are exactly the master rounded to the compute type.
      REQUIRE(one.head_read.size() == one.head_master.size());
      for (size_t i = 0; i < one.head_read.size(); ++i) {
        INFO("element " << i << ": master " << one.head_master[i]);
        REQUIRE(one.head_read[i] == round_to(compute, one.head_master[i]));
      }
      // Not the fp32 values themselves: the layout is in use.
      CHECK(one.head_read != one.head_master);
      // Against the fp32-storage run of the same products: only the non-product uses of
      // the weights (norms, biases, the embedding lookup) read rounded values.
      const Run fp32_storage = train(1, 0, compute, false, steps)[0];
      for (int s = 0; s < steps; ++s) {
        CHECK(one.losses[static_cast<size_t>(s)] ==
              Approx(fp32_storage.losses[static_cast<size_t>(s)]).epsilon(5e-3));
      }
      CHECK(worst_difference(one.master, fp32_storage.master) < 1e-2);
      for (const auto& [dp, zero] : {std::pair{2, 0}, {2, 1}, {2, 2}, {4, 1}}) {
        DYNAMIC_SECTION("dp " << dp << ", zero " << zero) {
          const auto got = train(dp, zero, compute, true, steps);
          for (const Run& r : got) {
            CHECK(r.master == got[0].master);  // every rank gathers the same master
            CHECK(r.head_read == got[0].head_read);
            for (int s = 0; s < steps; ++s) {
              CHECK(r.losses[static_cast<size_t>(s)] ==
                    Approx(one.losses[static_cast<size_t>(s)]).epsilon(2e-5));
            }
            // A reordered fp32 sum can tip a weight's rounding to its 16-bit neighbour;
            // the master follows within a small fraction of its own change (~1e-2 above).
            CHECK(worst_difference(r.master, one.master) < 5e-4);
          }
        }
      }
    }
  }
}

TEST_CASE(
    "mixed_params_bytes is what the mixed layout allocates: 18 bytes a parameter, or "
    "6 + 12/dp under ZeRO",
    "[parallel][mixed]") {
  for (const int zero : {0, 1}) {
    for (const int dp_size : {1, 2, 4}) {
      DYNAMIC_SECTION("dp " << dp_size << ", zero " << zero) {
        parallel::testing::on_dp_group(dp_size, [&](trainctl::comm::Communicator& dp) {
          auto backend = ops::make_cpu_backend({.threads = 1, .matmul = DType::bf16});
          model::GptOptions options;
          options.grads_only = true;
          model::Gpt gpt(kConfig, *backend, 2, 16, options);
          const auto specs = model::gpt_param_specs(kConfig, gpt.shard());
          const auto grads_bytes = static_cast<size_t>(model::flat_size(specs)) * sizeof(float);
          CHECK(gpt.params().data() == nullptr);  // no fp32 copy of the model
          REQUIRE(gpt.params().grads() != nullptr);
          const size_t before = backend->peak_allocated_bytes();  // nothing freed in between
          parallel::DataParallelOptions dp_options;
          dp_options.zero_stage = dp_size > 1 ? zero : 0;
          dp_options.weights = DType::bf16;
          parallel::DataParallel ddp(dp, gpt, *backend, {.type = "adamw", .weight_decay = 0.1},
                                     dp_options);
          const parallel::MixedParamsBytes m =
              parallel::mixed_params_bytes(specs, dp.size(), dp_options.zero_stage > 0);
          const auto moments = ddp.optimizer_state_bytes();
          CHECK(backend->peak_allocated_bytes() - before ==
                static_cast<size_t>(m.weights + m.master + m.widened + m.staging) + moments);
          // Model state per parameter: weights, fp32 gradients, master, moments.
          const double n = static_cast<double>(gpt.params().total());
          const double state =
              static_cast<double>(m.weights + m.master) + double(grads_bytes) + double(moments);
          const double expected = dp_options.zero_stage > 0 ? 6.0 + 12.0 / dp.size() : 18.0;
          CHECK(state / n == Approx(expected).epsilon(0.01));
        });
      }
    }
  }
}
