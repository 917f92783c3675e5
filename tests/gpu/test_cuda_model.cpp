// The whole GPT (model layer, unchanged) on the CUDA backend against the CPU backend: same
// seed, same batch, same loss and gradients within float tolerance.
#include "gpu/gpu_support.h"
#include "model/gpt.h"

using namespace trainctl;
using namespace trainctl::gpu_test;

namespace {

struct Step {
  double loss = 0;
  int64_t count = 0;
  std::vector<float> grads;
  double eval_loss = 0;
};

Step run_step(ops::Backend& be, const model::ModelConfig& cfg, int B, int T,
              const std::vector<int32_t>& tokens, const std::vector<int32_t>& targets) {
  model::Gpt gpt(cfg, be, B, T);
  gpt.init_weights(1234);
  Step s;
  s.loss = gpt.forward_backward(tokens.data(), targets.data(), 1.0f / (B * T), &s.count);
  const auto total = static_cast<size_t>(gpt.params().total());
  s.grads.resize(total);
  be.copy(s.grads.data(), gpt.params().grads(), total);
  int64_t eval_count = 0;
  s.eval_loss = gpt.forward_loss(tokens.data(), targets.data(), &eval_count);
  return s;
}

}  // namespace

TEST_CASE("one GPT step on CUDA matches the CPU backend", "[gpu][model]") {
  Backends b;
  model::ModelConfig cfg;
  cfg.vocab_size = 96;
  cfg.max_seq_len = 32;
  cfg.n_layer = 2;
  cfg.n_head = 4;
  cfg.d_model = 64;
  const int B = 3, T = 32;
  std::vector<int32_t> tokens(B * T), targets(B * T);
  std::mt19937 rng(7);
  for (int i = 0; i < B * T; ++i) {
    tokens[i] = static_cast<int32_t>(rng() % cfg.vocab_size);
    targets[i] = static_cast<int32_t>(rng() % cfg.vocab_size);
  }
  targets[5] = -1;
  const Step cpu = run_step(*b.cpu, cfg, B, T, tokens, targets);
  const Step gpu = run_step(*b.cuda, cfg, B, T, tokens, targets);
  CHECK(gpu.count == cpu.count);
  CHECK(gpu.loss == Approx(cpu.loss).epsilon(1e-5));
  CHECK(gpu.eval_loss == Approx(cpu.eval_loss).epsilon(1e-5));
  check_close(gpu.grads, cpu.grads, 2e-3, 1e-6, "GPT parameter gradients");
}
