// The mixed-precision memory plan (plan/memory_plan.h, counting the engine's own buffers,
// the same on device: cuda and cpu): Megatron's bytes per parameter, every row of Narayanan
// et al. 2021 Table 1 fitting the 80 GB A100s it ran on, Llama 3 405B fitting an 80 GB H100
// with Meta's layout, the options that would fit, and its activations per layer against
// the tensor-by-tensor model checked on Korthikanti et al. 2022 (plan/activation_model.h).
#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "plan/activation_model.h"
#include "plan/memory_plan.h"
#include "util/error.h"

using namespace trainctl;

namespace {

constexpr double kGB = 1e9;
// What "80 GB" devices hold, as NVML reports them (81,920 and 81,559 MiB; the cluster
// files' device.memory_gb).
constexpr double kA100Bytes = 81920.0 * (1 << 20);
constexpr double kH100Bytes = 81559.0 * (1 << 20);

config::JobSpec gpu_job(int layers, int heads, int hidden, int tp, int pp, int dp, int batch) {
  config::JobSpec s;
  s.device = Device::cuda;
  s.precision.compute = DType::bf16;
  s.model.vocab_size = 51200;
  s.model.seq_len = 2048;
  s.model.n_layer = layers;
  s.model.n_head = heads;
  s.model.d_model = hidden;
  s.parallel.tp = tp;
  s.parallel.pp = pp;
  s.parallel.dp = dp;
  s.training.micro_batch_size = 1;
  s.training.global_batch_size = batch;
  s.training.activation_checkpointing = "full";
  return s;
}

// Meta's Llama 3 405B (arXiv:2407.21783 Table 3) on tp 8, pp 16, dp 64 at seq_len 8192.
config::JobSpec llama3_405b() {
  config::JobSpec s = gpu_job(126, 128, 16384, 8, 16, 64, 2048);
  s.model.type = "llama";
  s.model.n_kv_head = 8;
  s.model.ffn_hidden = 53248;
  s.model.vocab_size = 128256;
  s.model.seq_len = 8192;
  s.model.rope_theta = 500000;
  s.parallel.schedule = "interleaved";
  s.parallel.virtual_stages = 2;
  s.parallel.zero = 1;  // Megatron's distributed optimizer
  return s;
}

}  // namespace

TEST_CASE("mixed-precision plan: Megatron's bytes per parameter, 18 and 6 + 12/dp",
          "[plan][memory]") {
  config::JobSpec s = gpu_job(4, 16, 1024, 1, 1, 8, 8);
  s.training.activation_checkpointing = "none";
  const plan::MemoryBreakdown zero0 = plan::plan_memory(s).at(0);
  const double n = zero0.parameters / 2;
  CHECK(zero0.gradients == Approx(4 * n));
  CHECK(zero0.master == Approx(4 * n));
  CHECK(zero0.optimizer == Approx(8 * n));
  s.parallel.zero = 1;
  const plan::MemoryBreakdown zero1 = plan::plan_memory(s).at(0);
  const double state = zero1.parameters + zero1.gradients + zero1.master + zero1.optimizer;
  CHECK(state == Approx((6 + 12.0 / 8) * n).epsilon(1e-4));
  // fp16 keeps fp32 gradients too (parallel/mixed_params.h): the same 6 + 12/dp.
  s.precision.compute = DType::fp16;
  const plan::MemoryBreakdown f16 = plan::plan_memory(s).at(0);
  CHECK(f16.parameters + f16.gradients + f16.master + f16.optimizer ==
        Approx((6 + 12.0 / 8) * n).epsilon(1e-4));
  // device: cpu builds the same model state (16-bit weights, the master sharded over dp)...
  s.device = Device::cpu;
  const plan::MemoryBreakdown cpu = plan::plan_memory(s).at(0);
  CHECK(cpu.parameters == Approx(2 * n).epsilon(1e-3));
  CHECK(cpu.master == Approx(4 * n / 8).epsilon(1e-3));
  CHECK(cpu.parameters + cpu.gradients + cpu.master + cpu.optimizer ==
        Approx((6 + 12.0 / 8) * n).epsilon(1e-3));
  // ... and fp32 none.
  s.precision.compute = DType::fp32;
  const plan::MemoryBreakdown fp32 = plan::plan_memory(s).at(0);
  CHECK(fp32.master == 0);
  CHECK(fp32.parameters == Approx(4 * n));
}

TEST_CASE("mixed-precision plan: every Narayanan et al. 2021 Table 1 row fits 80 GB",
          "[plan][memory]") {
  std::ifstream in(std::string(TRAINCTL_SOURCE_DIR) + "/tests/data/megatron_2021_table1.csv");
  REQUIRE(in);
  int rows = 0;
  bool header = true;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    if (header) {
      header = false;
      continue;
    }
    for (char& c : line) c = c == ',' ? ' ' : c;
    std::istringstream f(line);
    double params_b = 0, tflops = 0;
    int heads = 0, hidden = 0, layers = 0, tp = 0, pp = 0, gpus = 0, batch = 0;
    f >> params_b >> heads >> hidden >> layers >> tp >> pp >> gpus >> batch >> tflops;
    REQUIRE(f);
    const int dp = gpus / (tp * pp);
    config::JobSpec s = gpu_job(layers, heads, hidden, tp, pp, dp, batch);
    // The paper's schedule as tests/unit/test_cost_model.cpp assumes it.
    if (pp > 1 && (layers / pp) % 2 == 0) {
      s.parallel.schedule = "interleaved";
      s.parallel.virtual_stages = 2;
    }
    const double peak = plan::peak_rank_bytes(plan::plan_memory(s));
    INFO(params_b << "B (tp " << tp << ", pp " << pp << ", dp " << dp << "): " << peak / kGB
                  << " GB per GPU");
    CHECK(peak < kA100Bytes);
    ++rows;
  }
  CHECK(rows == 10);
}

TEST_CASE("mixed-precision plan: Llama 3 405B on Meta's layout fits an 80 GB H100",
          "[plan][memory]") {
  const config::JobSpec s = llama3_405b();
  const std::vector<plan::MemoryBreakdown> plan = plan::plan_memory(s);
  REQUIRE(plan.size() == 16);
  const double peak = plan::peak_rank_bytes(plan);
  INFO(plan::format_memory_plan(s, plan));
  CHECK(peak < kH100Bytes);
  // About 3.2 billion parameters per GPU (405B / 128 model-parallel ranks).
  CHECK(plan.at(1).parameters / 2 == Approx(405e9 / 128).epsilon(0.05));
  // Without recomputation it does not fit, and the options say what would.
  config::JobSpec none = s;
  none.training.activation_checkpointing = "none";
  CHECK(plan::peak_rank_bytes(plan::plan_memory(none)) > kH100Bytes);
  const std::vector<plan::FitOption> options = plan::fit_options(none, kH100Bytes);
  REQUIRE_FALSE(options.empty());
  CHECK(options.front().change == "training.activation_checkpointing: full");
  CHECK(options.front().peak_bytes == Approx(peak));
  // Twice the pipeline stages is offered; twice the TP ranks is not (8 k/v heads).
  bool pp_offered = false;
  for (const plan::FitOption& o : options) {
    pp_offered |= o.change.rfind("parallel.pp: 32", 0) == 0;
    CHECK(o.change.rfind("parallel.tp", 0) != 0);
  }
  CHECK(pp_offered);
  // In fp32 it does not fit (weights, gradients and activations twice as wide).
  config::JobSpec fp32 = s;
  fp32.precision.compute = DType::fp32;
  CHECK(plan::peak_rank_bytes(plan::plan_memory(fp32)) > kH100Bytes);
}

TEST_CASE("mixed-precision plan: SGD keeps its fp32 master and momentum", "[plan][memory]") {
  // parallel/mixed_params.h gives every optimizer the fp32 master: with SGD, 2 + 4 + 4 + 4
  // bytes a parameter, on both devices.
  config::JobSpec s = gpu_job(4, 16, 1024, 1, 1, 2, 2);
  s.optimizer.type = "sgd";
  for (const Device d : {Device::cuda, Device::cpu}) {
    s.device = d;
    const plan::MemoryBreakdown b = plan::plan_memory(s).at(0);
    const double n = b.parameters / 2;
    CHECK(b.gradients == Approx(4 * n));
    CHECK(b.master == Approx(4 * n));
    CHECK(b.optimizer == Approx(4 * n));
  }
}

TEST_CASE("mixed-precision plan: device cuda and cpu build the same buffers", "[plan][memory]") {
  // The plan counts the engine's allocations (the CPU worker's measurement confirms them,
  // tests/integration/test_memory_plan.cpp); the CUDA backend runs the same engine.
  config::JobSpec s = gpu_job(4, 8, 512, 2, 2, 2, 16);
  s.model.seq_len = 512;
  s.parallel.zero = 1;
  s.parallel.schedule = "interleaved";
  s.parallel.virtual_stages = 2;
  const auto gpu = plan::plan_memory(s);
  s.device = Device::cpu;
  const auto cpu = plan::plan_memory(s);
  REQUIRE(gpu.size() == cpu.size());
  for (size_t i = 0; i < gpu.size(); ++i) CHECK(gpu[i].total() == cpu[i].total());
}

TEST_CASE("mixed-precision plan: a layer keeps what the tensor-by-tensor model counts",
          "[plan][memory]") {
  // The plan's activations per layer (the difference of two depths, one micro-batch in
  // flight) against plan/activation_model.h for trainctl's layer: flash-style attention,
  // no dropout, 16-bit stores. That model gives Korthikanti et al. 2022's Table 2 for
  // Megatron's layer (test_activation_model.cpp), so this ties the plan to the paper.
  for (const char* family : {"gpt", "llama"}) {
    for (const char* mode : {"none", "selective", "full"}) {
      for (const int tp : {1, 4}) {
        config::JobSpec s = gpu_job(4, 16, 1024, tp, 1, 1, 1);
        s.model.seq_len = 1024;
        if (std::string(family) == "llama") {
          s.model.type = "llama";
          s.model.n_kv_head = 4;
          s.model.ffn_hidden = 2816;
        }
        s.training.activation_checkpointing = mode;
        const double shallow = plan::plan_memory(s).at(0).activations;
        s.model.n_layer = 8;
        const double per_layer = (plan::plan_memory(s).at(0).activations - shallow) / 4;
        plan::LayerShape shape;
        shape.seq = 1024;
        shape.micro_batch = 1;
        shape.hidden = 1024;
        shape.heads = 16;
        shape.kv_hidden = std::string(family) == "llama" ? 4 * 64 : 1024;
        shape.ffn = std::string(family) == "llama" ? 2816 : 4096;
        shape.gated_mlp = std::string(family) == "llama";
        shape.tp = tp;
        const double model = plan::layer_activation_bytes(shape, plan::parse_kept_set(mode));
        INFO(family << ", " << mode << ", tp " << tp << ": plan " << per_layer / 1e6
                    << " MB per layer, model " << model / 1e6 << " MB");
        CHECK(std::abs(per_layer - model) / model < 0.15);
      }
    }
  }
}
