#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "model/gpt.h"
#include "ops/backend.h"
#include "parallel/grad_sync.h"
#include "test_parallel_support.h"

namespace parallel = trainctl::parallel;
namespace model = trainctl::model;
namespace ops = trainctl::ops;

TEST_CASE("GradSync on a GPT's backward pass equals a blocking allreduce after it", "[parallel]") {
  const model::GptConfig cfg{
      .vocab_size = 64, .max_seq_len = 16, .n_layer = 3, .n_head = 2, .d_model = 32};
  const int B = 2, T = 16, accum = 2, dp_size = 2;
  std::vector<std::vector<float>> overlapped(dp_size), blocking(dp_size);
  std::vector<size_t> buckets(dp_size);
  parallel::testing::on_dp_group(dp_size, [&](trainctl::comm::Communicator& dp) {
    const auto r = static_cast<size_t>(dp.rank());
    auto backend = ops::make_cpu_backend({.threads = 1});
    model::Gpt with_sync(cfg, *backend, B, T), plain(cfg, *backend, B, T);
    with_sync.init_weights(7);
    plain.init_weights(7);
    auto sync =
        parallel::attach_grad_sync(with_sync, dp, {.buckets = {.max_layers_per_bucket = 1}});
    buckets[r] = sync->buckets().size();
    std::vector<int32_t> tokens(B * T), targets(B * T);
    for (int step = 0; step < 2; ++step) {
      with_sync.params().zero_grads();
      plain.params().zero_grads();
      for (int m = 0; m < accum; ++m) {
        for (int i = 0; i < B * T; ++i) {  // different data on every rank and micro-batch
          tokens[static_cast<size_t>(i)] = (i * 7 + static_cast<int>(r) * 13 + m * 5 + step) % 64;
          targets[static_cast<size_t>(i)] = (i * 11 + static_cast<int>(r) * 3 + m) % 64;
        }
        int64_t count = 0;
        sync->begin_micro_batch(m == accum - 1);
        with_sync.forward_backward(tokens.data(), targets.data(), 1.0f / 256, &count);
        plain.forward_backward(tokens.data(), targets.data(), 1.0f / 256, &count);
      }
      sync->finish();
      if (sync->stats().collectives != cfg.n_layer + 1) throw std::runtime_error("bucket count");
      dp.allreduce(plain.params().grads(), static_cast<size_t>(plain.params().total()));
    }
    with_sync.set_grad_ready_hook({});
    const auto n = static_cast<size_t>(plain.params().total());
    overlapped[r].assign(with_sync.params().grads(), with_sync.params().grads() + n);
    blocking[r].assign(plain.params().grads(), plain.params().grads() + n);
  });
  CHECK(buckets[0] == static_cast<size_t>(cfg.n_layer + 1));
  for (size_t r = 0; r < dp_size; ++r) {
    CHECK(overlapped[r] == blocking[r]);  // two ranks: the sum is exact either way
    CHECK(overlapped[r] == overlapped[0]);
  }
}
