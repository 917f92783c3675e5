// GPU benchmark of the Llama-family ops on the CUDA backend at a Llama 3 8B layer's shapes
// (d_model 4096, 32 query heads and 8 k/v heads of 128, FFN 14336; one sequence of 2048 by
// default): RMSNorm, RoPE on q and k, SwiGLU and grouped-query attention, forward and
// backward. Prints one JSON line per op with the median milliseconds per call and the
// bandwidth of the bytes each op must move (read once + written once).
//   gpu_bench_llama_ops [--batch 1] [--seq 2048] [--reps 20]
// Each call includes the backend's end-of-op synchronisation (unless TRAINCTL_CUDA_ASYNC=1),
// as a training step pays it.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "device/cuda_plugin.h"
#include "device/make_backend.h"
#include "ops/backend.h"

using namespace trainctl;

namespace {

double median_ms(int reps, const std::function<void()>& op) {
  op();  // warm-up: first-call allocations and module loading
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    op();
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

void report(const std::string& device, const char* op, double ms, double bytes) {
  std::printf(
      "{\"bench\": \"llama-ops\", \"device\": \"%s\", \"op\": \"%s\", \"ms\": %.4f, "
      "\"gb_per_s\": %.1f}\n",
      device.c_str(), op, ms, bytes / (ms * 1e-3) / 1e9);
}

}  // namespace

int main(int argc, char** argv) {
  int batch = 1, seq = 2048, reps = 20;
  for (int i = 1; i < argc; i += 2) {
    if (i + 1 >= argc) {
      std::fprintf(stderr, "option %s needs a value\n", argv[i]);
      return 2;
    }
    const std::string k = argv[i];
    const int v = std::atoi(argv[i + 1]);
    if (k == "--batch") {
      batch = v;
    } else if (k == "--seq") {
      seq = v;
    } else if (k == "--reps") {
      reps = v;
    } else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return 2;
    }
  }
  if (batch <= 0 || seq <= 0 || reps <= 0) {
    std::fprintf(stderr, "--batch, --seq and --reps must be positive\n");
    return 2;
  }
  const device::CudaAvailability a = device::cuda_availability();
  if (!a.available) {
    std::printf("no GPU: skipped (%s)\n", a.reason.c_str());
    return 77;
  }
  const std::string dev = a.devices[0];
  auto be = device::make_backend(Device::cuda, {}, 0);
  const int C = 4096, H = 14336;
  const ops::AttentionShape shape{batch, seq, 32, 8, 128};
  const size_t N = static_cast<size_t>(batch) * seq, f = sizeof(float);
  auto buffer = [&](size_t n) { return static_cast<float*>(be->alloc(n * f)); };
  const size_t big = std::max({N * C, N * 2 * H, N * shape.qkv_width()});
  float *x = buffer(big), *y = buffer(big), *dy = buffer(big), *dx = buffer(big);
  float *w = buffer(C), *dw = buffer(C), *stat = buffer(N * shape.n_head);
  for (float* p : {x, dy}) {  // inputs in [-0.5, 0.5) (alloc zero-fills)
    std::vector<float> host(big);
    for (size_t i = 0; i < big; ++i) host[i] = 0.001f * static_cast<float>(i % 1000) - 0.5f;
    be->copy(p, host.data(), big);
  }
  {
    std::vector<float> ones(C, 1.0f);
    be->copy(w, ones.data(), C);
  }
  const double nc = static_cast<double>(N) * C * f;
  report(dev, "rmsnorm_forward",
         median_ms(reps, [&] { be->rmsnorm_forward(y, stat, x, w, int(N), C, 1e-5f); }), 2 * nc);
  report(dev, "rmsnorm_backward",
         median_ms(reps, [&] { be->rmsnorm_backward(dx, dw, dy, x, w, stat, int(N), C); }), 3 * nc);
  const int heads = shape.n_head + shape.n_kv_head;
  const double rope_bytes = 2.0 * static_cast<double>(N) * heads * shape.head_dim * f;
  report(dev, "rope_forward",
         median_ms(reps,
                   [&] {
                     be->rope_forward(x, batch, seq, shape.qkv_width(), heads, shape.head_dim,
                                      500000.0f, 0);
                   }),
         rope_bytes);
  report(dev, "rope_backward",
         median_ms(reps,
                   [&] {
                     be->rope_backward(x, batch, seq, shape.qkv_width(), heads, shape.head_dim,
                                       500000.0f, 0);
                   }),
         rope_bytes);
  const double nh = static_cast<double>(N) * H * f;
  report(dev, "swiglu_forward", median_ms(reps, [&] { be->swiglu_forward(y, x, int(N), H); }),
         3 * nh);
  report(dev, "swiglu_backward",
         median_ms(reps, [&] { be->swiglu_backward(dx, dy, x, int(N), H); }), 5 * nh);
  // Attention: the bytes of its inputs and outputs only (its scores are never stored).
  const double qkv = static_cast<double>(N) * shape.qkv_width() * f;
  const double out = static_cast<double>(N) * shape.q_width() * f;
  report(dev, "gqa_attention_forward",
         median_ms(reps, [&] { be->attention_forward(y, stat, x, shape); }), qkv + out);
  report(dev, "gqa_attention_backward",
         median_ms(reps, [&] { be->attention_backward(dx, dy, x, y, stat, shape); }),
         2 * qkv + 2 * out);
  for (float* p : {x, y, dy, dx, w, dw, stat}) be->free(p);
  return 0;
}
