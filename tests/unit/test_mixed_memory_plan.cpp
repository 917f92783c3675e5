// device: cuda's mixed-precision memory plan (plan/mixed_memory_plan.h): Megatron's bytes
// per parameter, every row of Narayanan et al. 2021 Table 1 fitting the 80 GB A100s it ran
// on, Llama 3 405B fitting an 80 GB H100 with Meta's layout, the options that would fit,
// and the combinations without a layout refused.
#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "plan/memory_plan.h"
#include "plan/mixed_memory_plan.h"
#include "util/error.h"

using namespace trainctl;

namespace {

constexpr double kGB = 1e9;

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
    CHECK(peak < 80 * kGB);
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
  CHECK(peak < 80 * kGB);
  // About 3.2 billion parameters per GPU (405B / 128 model-parallel ranks).
  CHECK(plan.at(1).parameters / 2 == Approx(405e9 / 128).epsilon(0.05));
  // Without recomputation it does not fit, and the options say what would.
  config::JobSpec none = s;
  none.training.activation_checkpointing = "none";
  CHECK(plan::peak_rank_bytes(plan::plan_memory(none)) > 80 * kGB);
  const std::vector<plan::FitOption> options = plan::fit_options(none, 80 * kGB);
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
  // The fp32 layout of the CPU worker is far over (the 877 GB class of answer).
  config::JobSpec cpu = s;
  cpu.device = Device::cpu;
  CHECK(plan::peak_rank_bytes(plan::plan_memory(cpu)) > 80 * kGB);
}

TEST_CASE("mixed-precision plan: a combination without a memory layout is refused",
          "[plan][memory]") {
  config::JobSpec s = gpu_job(4, 16, 1024, 1, 1, 2, 2);
  s.optimizer.type = "sgd";
  CHECK_THROWS_WITH(plan::plan_memory(s), Catch::Contains("optimizer.type: sgd") &&
                                              Catch::Contains("precision.compute: fp32"));
  s.precision.compute = DType::fp32;  // the fp32 layout the trainer builds
  CHECK_NOTHROW(plan::plan_memory(s));
  s.device = Device::cpu;  // the CPU worker's fp32 layout, with bf16 matrix products
  s.precision.compute = DType::bf16;
  CHECK_NOTHROW(plan::plan_memory(s));
}

TEST_CASE("mixed-precision plan: its activations are the CPU worker's, both in 16 bits",
          "[plan][memory]") {
  // The CPU plan equals what the worker measures (tests/integration/test_memory_plan.cpp);
  // the GPU plan counts the same tensors in 16 bits, and the CPU worker keeps them in 16-bit
  // stores too (model/activation_arena.h; its layer is flash-style as well), so on a 1F1B
  // pipeline, whose in-flight micro-batches are whole, the two agree. The CPU worker keeps
  // the block outputs, the norms' statistics and the log-sum-exp in fp32: under full
  // recomputation, where the block outputs are all it keeps, it holds twice the GPU's.
  for (const char* model : {"gpt", "llama"}) {
    for (const char* mode : {"none", "selective", "full"}) {
      config::JobSpec s = gpu_job(4, 8, 512, 2, 2, 1, 8);
      s.model.seq_len = 512;
      if (std::string(model) == "llama") {
        s.model.type = "llama";
        s.model.n_kv_head = 4;
        s.model.ffn_hidden = 2048;
      }
      s.training.activation_checkpointing = mode;
      const plan::MemoryBreakdown gpu = plan::plan_memory(s).at(0);
      s.device = Device::cpu;
      const plan::MemoryBreakdown cpu = plan::plan_memory(s).at(0);
      INFO(model << ", " << mode << ": GPU " << gpu.activations << " bytes, CPU "
                 << cpu.activations);
      CHECK(gpu.activation_slots == cpu.activation_slots);
      if (std::string(mode) == "none") {
        CHECK(gpu.activations == Approx(cpu.activations).epsilon(0.2));
      } else {
        // Recomputation: the CPU worker keeps each chunk's last output too (Megatron frees
        // it once sent) and recomputes part of a layer in backward scratch; same order.
        const double width = std::string(mode) == "full" ? 2.0 : 1.0;
        CHECK(width * gpu.activations > 0.5 * cpu.activations);
        CHECK(width * gpu.activations < 1.5 * cpu.activations);
      }
    }
  }
}
