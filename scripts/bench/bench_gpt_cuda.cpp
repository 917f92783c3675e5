// GPU benchmark: training steps of GPT-2 124M shapes (the model layer unchanged, on the
// CUDA backend), printing one JSON line with tokens/s and MFU.
//   gpu_bench_gpt [--batch 8] [--seq 1024] [--steps 10] [--warmup 3] [--peak-tflops X]
//                 [--matmul fp32|bf16|fp16]
// --matmul sets BackendOptions::matmul: the operand type of the matrix products (fp32
// accumulation either way). MFU = model FLOPs per token (6N + 12 L C T, PaLM appendix B) x
// tokens/s / peak, where the peak is the GPU's dense rate for the products' operands: fp32
// (TF32 tensor cores when TRAINCTL_CUDA_TF32=1), or bf16/fp16 tensor cores; looked up by GPU
// name unless --peak-tflops gives it.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "device/cuda_plugin.h"
#include "device/make_backend.h"
#include "model/gpt.h"

using namespace trainctl;

namespace {

// Dense peak TFLOP/s: {fp32, tf32, bf16/fp16 with fp32 accumulation}. SXM parts; PCIe H100
// is lower (51 / 378 / 756).
struct Peak {
  const char* name;
  double fp32, tf32, half;
};
constexpr Peak kPeaks[] = {{"H200", 66.9, 494.7, 989.4}, {"H100 PCIe", 51.2, 378.0, 756.0},
                           {"H100", 66.9, 494.7, 989.4}, {"A100", 19.5, 156.0, 312.0},
                           {"L40S", 91.6, 183.0, 362.1}, {"A10", 31.2, 62.5, 125.0}};

double peak_tflops(const std::string& device, bool tf32, DType matmul) {
  for (const Peak& p : kPeaks) {
    if (device.find(p.name) == std::string::npos) continue;
    if (matmul != DType::fp32) return p.half;
    return tf32 ? p.tf32 : p.fp32;
  }
  return 0.0;
}

}  // namespace

int main(int argc, char** argv) {
  int batch = 8, seq = 1024, steps = 10, warmup = 3;
  double peak = -1;
  DType matmul = DType::fp32;
  for (int i = 1; i < argc; i += 2) {
    if (i + 1 >= argc) {
      std::fprintf(stderr, "option %s needs a value\n", argv[i]);
      return 2;
    }
    const std::string k = argv[i];
    const char* v = argv[i + 1];
    if (k == "--batch")
      batch = std::atoi(v);
    else if (k == "--seq")
      seq = std::atoi(v);
    else if (k == "--steps")
      steps = std::atoi(v);
    else if (k == "--warmup")
      warmup = std::atoi(v);
    else if (k == "--peak-tflops")
      peak = std::atof(v);
    else if (k == "--matmul") {
      const std::string m = v;
      if (m == "fp32") {
        matmul = DType::fp32;
      } else if (m == "bf16") {
        matmul = DType::bf16;
      } else if (m == "fp16") {
        matmul = DType::fp16;
      } else {
        std::fprintf(stderr, "--matmul: expected fp32, bf16 or fp16, got %s\n", v);
        return 2;
      }
    } else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return 2;
    }
  }
  const device::CudaAvailability a = device::cuda_availability();
  if (!a.available) {
    std::printf("no GPU: skipped (%s)\n", a.reason.c_str());
    return 77;
  }
  const char* tf32_env = std::getenv("TRAINCTL_CUDA_TF32");
  const bool tf32 = tf32_env != nullptr && std::strcmp(tf32_env, "1") == 0;
  if (peak < 0) peak = peak_tflops(a.devices[0], tf32, matmul);

  model::ModelConfig cfg;  // GPT-2 124M, vocabulary padded to a multiple of 128 (llm.c)
  cfg.vocab_size = 50304;
  cfg.max_seq_len = seq;
  cfg.n_layer = 12;
  cfg.n_head = 12;
  cfg.d_model = 768;
  auto be = device::make_backend(Device::cuda, {.matmul = matmul}, 0);
  model::Gpt gpt(cfg, *be, batch, seq);
  gpt.init_weights(1);
  const auto total = static_cast<size_t>(gpt.params().total());
  float* m = static_cast<float*>(be->alloc(total * sizeof(float)));
  float* v = static_cast<float*>(be->alloc(total * sizeof(float)));

  std::vector<int32_t> tokens(static_cast<size_t>(batch) * seq), targets(tokens.size());
  std::mt19937 rng(1);
  for (size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = static_cast<int32_t>(rng() % 50257);
    targets[i] = static_cast<int32_t>(rng() % 50257);
  }
  double loss = 0;
  auto one_step = [&](int step) {
    be->zero(gpt.params().grads(), total);
    int64_t count = 0;
    loss = gpt.forward_backward(tokens.data(), targets.data(),
                                1.0f / static_cast<float>(tokens.size()), &count) /
           static_cast<double>(count);
    // adamw returns once the step is complete on the GPU: the timing covers all work.
    be->adamw(gpt.params().data(), gpt.params().grads(), m, v, total, 6e-4f, 0.9f, 0.95f, 1e-8f,
              0.1f, step);
  };
  for (int s = 1; s <= warmup; ++s) one_step(s);
  const auto t0 = std::chrono::steady_clock::now();
  for (int s = 1; s <= steps; ++s) one_step(warmup + s);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double tokens_per_s = static_cast<double>(tokens.size()) * steps / secs;
  const double flops = cfg.flops_per_token(seq) * tokens_per_s;
  std::printf(
      "{\"bench\": \"gpt2-124m\", \"device\": \"%s\", \"batch\": %d, \"seq_len\": %d, "
      "\"params\": %lld, \"matmul\": \"%s\", \"tf32\": %s, \"steps\": %d, \"step_ms\": %.2f, "
      "\"tokens_per_s\": %.0f, "
      "\"model_tflops\": %.2f, \"peak_tflops\": %.1f, \"mfu\": %s, \"loss\": %.4f, "
      "\"peak_device_bytes\": %zu}\n",
      a.devices[0].c_str(), batch, seq, static_cast<long long>(cfg.num_params()),
      dtype_name(matmul), tf32 ? "true" : "false", steps, 1000.0 * secs / steps, tokens_per_s,
      flops / 1e12, peak, peak > 0 ? std::to_string(flops / 1e12 / peak).c_str() : "null", loss,
      device::peak_device_bytes(*be));
  be->free(m);
  be->free(v);
  return 0;
}
