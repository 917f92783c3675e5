// `trainctl plan --cluster` for a GPU job: the mixed-precision memory plan checked against
// the cluster's GPU memory, what would fit when it does not, and SGD's mixed layout.
#include <catch2/catch.hpp>

#include "integration/helpers.h"

using namespace trainctl::test;

namespace {

// Llama 3 405B on Meta's layout (tp 8, pp 16, dp 64, seq_len 8192, interleaved), with
// Megatron's settings: bf16, distributed optimizer (zero: 1), full recomputation.
const char* kLlama405b =
    "name: llama405b\ndevice: cuda\n"
    "model: {type: llama, vocab_size: 128256, seq_len: 8192, n_layer: 126, n_head: 128, "
    "n_kv_head: 8, d_model: 16384, ffn_hidden: 53248, rope_theta: 500000}\n"
    "parallel: {dp: 64, tp: 8, pp: 16, zero: 1, schedule: interleaved, virtual_stages: 2}\n"
    "training: {micro_batch_size: 1, global_batch_size: 2048, activation_checkpointing: full}\n"
    "precision: {compute: bf16}\n";

}  // namespace

TEST_CASE("plan --cluster: Llama 3 405B fits an H100, and says what fits when it does not",
          "[plan][integration]") {
  TempDir dir("plan_gpu_memory");
  const fs::path job = dir / "job.yaml";
  write_text(job, kLlama405b);
  const std::string cluster =
      std::string(TRAINCTL_SOURCE_DIR) + "/configs/clusters/h100-superpod.yaml";
  ProcResult r = run_trainctl({"plan", job.string(), "--cluster", cluster}, dir.path());
  INFO(r.out.substr(r.out.find("memory per rank")) << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("bf16 mixed precision"));
  CHECK_THAT(r.out, Catch::Contains("master"));
  CHECK_THAT(r.out, Catch::Contains("per rank (the cluster file's device.memory_gb)"));
  CHECK_THAT(r.out, !Catch::Contains("over the limit"));
  CHECK_THAT(r.out, Catch::Contains("of the device's 85.5 GB"));

  ProcResult none = run_trainctl({"plan", job.string(), "--cluster", cluster, "--set",
                                  "training.activation_checkpointing=none"},
                                 dir.path());
  INFO(none.out.substr(none.out.find("memory per rank")) << none.err);
  REQUIRE(none.exit_code == 0);  // plan starts nothing: it says, it does not refuse
  CHECK_THAT(none.out, Catch::Contains("over the limit: the job needs about"));
  CHECK_THAT(none.out, Catch::Contains("* training.activation_checkpointing: full ->"));
}

TEST_CASE("plan: 16-bit compute with SGD on device: cuda keeps an fp32 master and momentum",
          "[plan][integration]") {
  // parallel/mixed_params.h gives every optimizer the fp32 master, on both backends: SGD's
  // layout is built, so nothing is refused (bf16 weights 2, gradients 4, master 4,
  // momentum 4 bytes a parameter).
  TempDir dir("plan_gpu_layout");
  const fs::path job = dir / "job.yaml";
  write_text(job,
             "name: sgd16\ndevice: cuda\noptimizer: {type: sgd}\nprecision: {compute: bf16}\n");
  ProcResult r = run_trainctl({"plan", job.string()}, dir.path());
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("bf16 mixed precision") && Catch::Contains("master"));
}
