// The mixed-precision layout (parallel/mixed_params.h) through the real binary: checkpoints
// hold the fp32 master weights and resume bitwise, also on another DP layout and in fp32;
// the plan's model state is 18 bytes a parameter, 6 + 12/dp under ZeRO-1, the activations
// kept for backward are 16-bit (model/activation_arena.h), and each rank's measured tensor
// memory follows the plan.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "checkpoint/reader.h"
#include "integration/helpers.h"
#include "integration/small_run.h"
#include "model/shard.h"

using namespace trainctl::test;
using nlohmann::json;

namespace {

std::vector<json> train_mixed(const fs::path& dir, const std::string& name,
                              const std::string& parallel, const std::string& compute,
                              std::vector<std::string> extra = {}) {
  return train_small(dir, name,
                     {.parallel = parallel,
                      .precision = "{compute: " + compute + "}",
                      .training = "steps: 8, micro_batch_size: 2, global_batch_size: 8",
                      .checkpoint = "{every_steps: 4, async: false}"},
                     std::move(extra));
}

// Elements of the GPT's token table in a checkpoint that need more than bf16's 8
// significant bits: fp32 master values, not 16-bit weights.
size_t wider_than_bf16(const fs::path& checkpoint) {
  trainctl::checkpoint::CheckpointReader reader(checkpoint);
  trainctl::model::TensorShard whole;
  whole.global_shape = {64, 32};
  std::vector<float> wte(64 * 32);
  reader.read_slice("transformer.wte.weight", whole, wte.data());
  size_t wider = 0;
  for (const float x : wte) {
    uint32_t bits = 0;
    std::memcpy(&bits, &x, sizeof bits);
    if ((bits & 0xffffu) != 0) ++wider;
  }
  return wider;
}

std::vector<double> losses_from(const std::vector<json>& rows, size_t first) {
  std::vector<double> out;
  for (size_t i = first; i < rows.size(); ++i) out.push_back(rows[i]["loss"].get<double>());
  return out;
}

// Plans and runs a one-step job; checks that every rank's measured tensor memory is its
// plan within 10%, and returns rank 0's plan with what each rank measured.
struct Measured {
  double state_mb = 0;        // rank 0's planned parameters + gradients + master + optimizer
  double activations_mb = 0;  // rank 0's planned kept activations
  std::vector<double> peak_mb;
};

Measured measure_memory(const fs::path& dir, const std::string& name, const std::string& model,
                        const std::string& parallel, const std::string& compute, int micro_batch,
                        int global_batch) {
  const fs::path job = dir / (name + ".yaml");
  write_text(job, "name: " + name + "\nseed: 3\nmodel: " + model +
                      "\ndata: {type: synthetic}\nparallel: " + parallel +
                      "\nprecision: {compute: " + compute +
                      "}\ntraining: {steps: 1, micro_batch_size: " + std::to_string(micro_batch) +
                      ", global_batch_size: " + std::to_string(global_batch) +
                      "}\nlogging: {every_steps: 1}\nruntime: {comm_timeout_s: 60}\n");
  const ProcResult plan = run_trainctl({"plan", job.string(), "--json"}, dir);
  INFO(name << "\n" << plan.out << plan.err);
  REQUIRE(plan.exit_code == 0);
  const json planned = json::parse(plan.out);
  const ProcResult train = run_trainctl({"train", job.string()}, dir, std::chrono::seconds(180));
  INFO(train.out << train.err);
  REQUIRE(train.exit_code == 0);
  std::istringstream in(read_text(dir / "runs" / name / "metrics.jsonl"));
  json last;
  for (std::string line; std::getline(in, line);) last = json::parse(line);
  Measured m;
  m.peak_mb = last["mem_peak_mb_ranks"].get<std::vector<double>>();
  REQUIRE(m.peak_mb.size() == planned["memory_mb"].size());
  for (size_t r = 0; r < m.peak_mb.size(); ++r) {
    CHECK(planned["memory_mb"][r]["total"].get<double>() == Approx(m.peak_mb[r]).epsilon(0.10));
  }
  const json& rank0 = planned["memory_mb"][0];
  m.state_mb = rank0["parameters"].get<double>() + rank0["gradients"].get<double>() +
               rank0["master_weights"].get<double>() + rank0["optimizer"].get<double>();
  m.activations_mb = rank0["activations"].get<double>();
  return m;
}

}  // namespace

TEST_CASE(
    "mixed precision: a checkpoint holds the fp32 master and resumes bitwise, on "
    "another dp and in fp32",
    "[train][mixed][resume]") {
  TempDir dir("mixed_resume");
  const auto straight = train_mixed(dir.path(), "straight", "{dp: 2, zero: 1}", "bf16");
  REQUIRE(straight.size() == 8);
  const fs::path ckpt = dir.path() / "runs" / "straight" / "checkpoints" / "step_00000004";
  REQUIRE(fs::exists(ckpt));
  // The checkpoint's weights are the fp32 master, not 16-bit values: most of them need more
  // than bf16's 8 significant bits.
  CHECK(wider_than_bf16(ckpt) > 64 * 32 / 2);
  // The same layout: bitwise the uninterrupted run.
  const auto resumed =
      train_mixed(dir.path(), "resumed", "{dp: 2, zero: 1}", "bf16", {"--resume", ckpt.string()});
  REQUIRE(resumed.size() == 4);
  CHECK(losses_from(resumed, 0) == losses_from(straight, 4));
  // Another DP layout and ZeRO stage: the same master, gradients summed in another order.
  for (const auto& [name, parallel] :
       {std::pair<std::string, std::string>{"dp1", "{dp: 1}"}, {"dp2-zero2", "{dp: 2, zero: 2}"}}) {
    const auto other = train_mixed(dir.path(), name, parallel, "bf16", {"--resume", ckpt.string()});
    REQUIRE(other.size() == 4);
    for (size_t i = 0; i < 4; ++i) {
      INFO(name << " step " << i + 5);
      CHECK(other[i]["loss"].get<double>() ==
            Approx(straight[i + 4]["loss"].get<double>()).epsilon(2e-5));
    }
  }
  // fp32 continues from the master itself: its first loss is the bf16 run's within bf16's
  // rounding of the products.
  const auto fp32 =
      train_mixed(dir.path(), "fp32", "{dp: 2, zero: 1}", "fp32", {"--resume", ckpt.string()});
  REQUIRE(fp32.size() == 4);
  CHECK(fp32[0]["loss"].get<double>() == Approx(straight[4]["loss"].get<double>()).epsilon(1e-2));
}

TEST_CASE(
    "mixed precision model state: 18 bytes a parameter, 6 + 12/dp with ZeRO-1, as "
    "each rank measures",
    "[train][mixed][memory]") {
  TempDir dir("mixed_memory");
  // Model state dominates: many wide blocks, one short sequence per step. (The layout's
  // two fp32 buffers of one block are ~1/8 of the 16 blocks' fp32 weights: ZeRO-1's saving
  // over fp32, 2 - 4/dp bytes a parameter, outweighs them from dp 4.)
  const std::string model = "{vocab_size: 256, seq_len: 16, n_layer: 16, n_head: 4, d_model: 256}";
  auto measure = [&](const std::string& name, int dp, int zero, const std::string& compute) {
    const Measured m = measure_memory(
        dir.path(), name, model,
        "{dp: " + std::to_string(dp) + ", zero: " + std::to_string(zero) + "}", compute, 1, dp);
    return std::pair{m.state_mb, m.peak_mb[0]};
  };
  for (const int dp : {1, 2, 4}) {
    const int zero = dp > 1 ? 1 : 0;
    DYNAMIC_SECTION("dp " << dp) {
      const auto [fp32_state, fp32_peak] =
          measure("fp32-dp" + std::to_string(dp), dp, zero, "fp32");
      const auto [bf16_state, bf16_peak] =
          measure("bf16-dp" + std::to_string(dp), dp, zero, "bf16");
      // fp32: 16 bytes a parameter (8 + 8/dp under ZeRO-1); the mixed layout 18 (6 + 12/dp).
      const double fp32_bytes = zero ? 8.0 + 8.0 / dp : 16.0;
      const double mixed_bytes = zero ? 6.0 + 12.0 / dp : 18.0;
      CHECK(bf16_state / fp32_state == Approx(mixed_bytes / fp32_bytes).epsilon(0.01));
      // What each rank measures moves the same way: up without ZeRO, down at dp 4.
      if (dp == 1) CHECK(bf16_peak > fp32_peak);
      if (dp == 4) CHECK(bf16_peak < fp32_peak);
    }
  }
}

TEST_CASE(
    "mixed precision with diloco resumes bitwise, and a parameter-server worker exports "
    "the fp32 master",
    "[train][mixed][resume]") {
  TempDir dir("mixed_modes");
  // DiLoCo: each replica's master is its own, averaged every sync; the checkpoint keeps
  // every replica's (dp_sync_state.cpp).
  const std::string diloco = "{dp: 2, dp_sync: diloco, sync_every: 3}";
  const auto straight = train_mixed(dir.path(), "diloco", diloco, "bf16");
  const fs::path ckpt = dir.path() / "runs" / "diloco" / "checkpoints" / "step_00000004";
  REQUIRE(fs::exists(ckpt));
  const auto resumed =
      train_mixed(dir.path(), "diloco-resumed", diloco, "bf16", {"--resume", ckpt.string()});
  REQUIRE(resumed.size() == 4);
  CHECK(losses_from(resumed, 0) == losses_from(straight, 4));
  // Parameter servers: the worker's master is the servers' fp32 values; the run ends with
  // them exported.
  const auto ps = train_mixed(
      dir.path(), "ps", "{dp: 2, mode: parameter_server, parameter_server: {servers: 2}}", "bf16");
  CHECK(ps.size() == 8);
  CHECK(wider_than_bf16(dir.path() / "runs" / "ps" / "checkpoints" / "step_00000008") >
        64 * 32 / 2);
  CHECK(fs::exists(dir.path() / "runs" / "ps" / "model.safetensors"));
}

TEST_CASE(
    "mixed precision activations: 16-bit stores halve what each micro-batch keeps, as "
    "each rank measures",
    "[train][mixed][memory]") {
  TempDir dir("mixed_activations");
  // Activations dominate: a long sequence through a narrow model. At pp 2 with 1F1B the
  // first stage keeps two micro-batches in flight, each in its own 16-bit store, beside one
  // fp32 working set for the whole model.
  const std::string model = "{vocab_size: 64, seq_len: 512, n_layer: 4, n_head: 2, d_model: 64}";
  for (const std::string parallel : {"{dp: 1}", "{pp: 2, schedule: 1f1b}"}) {
    DYNAMIC_SECTION(parallel) {
      const std::string tag = parallel == "{dp: 1}" ? "dp1" : "pp2";
      const Measured fp32 =
          measure_memory(dir.path(), "fp32-" + tag, model, parallel, "fp32", 2, 4);
      const Measured bf16 =
          measure_memory(dir.path(), "bf16-" + tag, model, parallel, "bf16", 2, 4);
      // What the micro-batches keep: the 16-bit stores (the residual stream included), and
      // in fp32 only the norms' statistics, the log-sum-exp and the LM head's rows.
      CHECK(bf16.activations_mb < 0.62 * fp32.activations_mb);
      CHECK(bf16.activations_mb > 0.45 * fp32.activations_mb);
      // Measured: less memory, by most of what the stores save (the working set and the
      // widened weights take some of it back). Rank 0 here; every rank's measurement is its
      // plan (measure_memory). The last pp stage keeps one micro-batch of two blocks: its
      // stores (half) plus the working set (one block) are what fp32 keeps, so it saves none.
      CHECK(bf16.peak_mb[0] < fp32.peak_mb[0] - 0.25 * (fp32.activations_mb - bf16.activations_mb));
    }
  }
}
