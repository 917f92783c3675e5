// Uneven pipeline stages in `trainctl plan` and `trainctl validate`: the blocks and the
// estimated time of each stage, and Llama 3 405B's 126 layers on 16 stages planned on a
// cluster file (the cost model takes the job's split).
#include <catch2/catch.hpp>

#include "integration/helpers.h"

using namespace trainctl::test;

namespace {

// Llama 3 405B (Grattafiori et al. 2024) on tp 8 x pp 16, one data-parallel replica.
std::string llama_405b(const std::string& parallel_extra) {
  return "name: llama405b\ndevice: cuda\n"
         "model: {type: llama, vocab_size: 128256, seq_len: 8192, n_layer: 126, n_head: 128, "
         "n_kv_head: 8, d_model: 16384, ffn_hidden: 53248}\n"
         "parallel: {tp: 8, pp: 16" +
         parallel_extra +
         "}\n"
         "precision: {compute: bf16}\n"
         "training: {micro_batch_size: 1, global_batch_size: 16}\n";
}

const std::string kCluster =
    std::string(TRAINCTL_SOURCE_DIR) + "/configs/clusters/h100-superpod.yaml";

}  // namespace

TEST_CASE("plan --cluster plans Llama 3 405B's 126 layers on 16 stages",
          "[plan][integration][uneven]") {
  TempDir dir("plan_uneven");
  const fs::path job = dir / "job.yaml";
  write_text(job, llama_405b(", layers_per_stage: [7, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, "
                             "8, 7]"));
  ProcResult r = run_trainctl({"plan", job.string(), "--cluster", kCluster}, dir.path());
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("layers (126 blocks, 16 stages):\n"
                                    " stage 0: embedding, blocks 0-6 (7); cost 7.00\n"
                                    " stage 1: blocks 7-14 (8); cost 8.00\n"));
  CHECK_THAT(r.out, Catch::Contains(" stage 15: blocks 119-125 (7), LM head; cost "));
  CHECK_THAT(r.out, Catch::Contains("split by parallel.layers_per_stage"));
  CHECK_THAT(r.out, Catch::Contains("predicted step "));
  // The cost model's time of each stage: the middle ones pace the pipeline.
  CHECK_THAT(r.out, Catch::Contains("  stage 0: 7 layers, "));
  CHECK_THAT(r.out, Catch::Contains("  stage 15: 7 layers + LM head, "));
  CHECK_THAT(r.out, Catch::Contains("  stage 1: 8 layers, ") && Catch::Contains(" ms (slowest)"));
  ProcResult j = run_trainctl({"plan", job.string(), "--cluster", kCluster, "--json"}, dir.path());
  REQUIRE(j.exit_code == 0);
  CHECK_THAT(j.out, Catch::Contains("\"stage_layers\":[7,8,8,8,8,8,8,8,8,8,8,8,8,8,8,7]"));

  // Without a split: stage_balance auto (the default) splits by cost, and finds Meta's.
  write_text(job, llama_405b(""));
  r = run_trainctl({"plan", job.string(), "--cluster", kCluster, "--json"}, dir.path());
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("\"stage_layers\":[7,8,8,8,8,8,8,8,8,8,8,8,8,8,8,7]"));
  r = run_trainctl({"plan", job.string()}, dir.path());
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("split by stage_balance: auto"));
  // Equal stages cannot hold 126 layers on 16 stages: refused with the fix.
  write_text(job, llama_405b(", stage_balance: equal"));
  r = run_trainctl({"plan", job.string(), "--cluster", kCluster}, dir.path());
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("job.yaml:") &&
                        Catch::Contains("parallel.stage_balance: equal needs model.n_layer 126 "
                                        "divisible by pp = 16 stages") &&
                        Catch::Contains("layers_per_stage: [7, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, "
                                        "8, 8, 8, 7]"));
}

TEST_CASE("validate prints the layers and the estimated cost of each pipeline stage",
          "[plan][integration][uneven]") {
  TempDir dir("validate_uneven");
  const fs::path job = dir / "job.yaml";
  write_text(job,
             "name: small\nmodel: {vocab_size: 64, seq_len: 16, n_layer: 5, n_head: 4, "
             "d_model: 32}\ndata: {type: synthetic}\n"
             "parallel: {pp: 2, layers_per_stage: [1, 4]}\n");
  ProcResult r = run_trainctl({"validate", job.string()}, dir.path());
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains(" stage 0: embedding, block 0; cost 1.00\n"
                                    " stage 1: blocks 1-4 (4), LM head; cost "));
  CHECK_THAT(r.out, Catch::Contains("split by parallel.layers_per_stage"));
  // The resolved spec keeps the split (what the workers read).
  r = run_trainctl({"validate", job.string(), "--show-resolved"}, dir.path());
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("  layers_per_stage: [1, 4]\n"));
}
