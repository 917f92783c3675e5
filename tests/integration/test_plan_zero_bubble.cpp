// `trainctl plan` with the zero-bubble schedule zb1p: the timeline with its B and W cells,
// the bubble against theory and 1F1B's, the same peak memory as 1F1B, and the cost model
// (`--cluster`) taking the schedule.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "integration/helpers.h"

using namespace trainctl::test;

TEST_CASE("plan draws zb1p with B and W and a third of 1F1B's bubble",
          "[plan][integration][zero_bubble]") {
  TempDir dir("planzb");
  const fs::path job = dir / "zb.yaml";
  write_text(job,
             "name: zb\nmodel: {n_layer: 8}\n"
             "parallel: {pp: 4, schedule: zb1p}\n"
             "training: {micro_batch_size: 4, global_batch_size: 32}\n");
  ProcResult r = run_trainctl({"plan", job.string()}, dir.path());
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  // (4 - 1) / (3 × 8 + 4 - 1) = 11.1%, against 1F1B's 27.3%; 1F1B's peak of 4 on stage 0,
  // and on every stage (stage s holds back s Ws).
  CHECK_THAT(r.out, Catch::Contains("schedule zb1p, 4 stages, 8 micro-batches: bubble 11.1% "
                                    "(theory (p-1)/(3m+p-1) = 11.1%; 1f1b: 27.3%)\n"
                                    "peak activations per stage [4, 4, 4, 4] (micro-batches "
                                    "held from F to W)"));
  CHECK_THAT(r.out, Catch::Contains("weight gradients W<mb> 1"));
  // The last stage: F, B, F, B, ... and its Ws from the fourth round on.
  CHECK_THAT(r.out, Catch::Contains("stage 3 | .. .. .. F0 B0 F1 B1 F2 B2 F3 B3 W0 F4 B4 W1"));

  // The memory plan: 1F1B's peak of 4 slots, on every stage (a slot is held until its W,
  // which reads the inputs stored there).
  ProcResult j = run_trainctl({"plan", job.string(), "--json"}, dir.path());
  REQUIRE(j.exit_code == 0);
  const auto plan = nlohmann::json::parse(j.out);
  CHECK(plan["schedule"] == "zb1p");
  CHECK(plan["memory_mb"][0]["activation_slots"] == 4);
  CHECK(plan["memory_mb"][3]["activation_slots"] == 4);
}

TEST_CASE("plan --cluster predicts zb1p's smaller bubble", "[plan][integration][zero_bubble]") {
  TempDir dir("planzb_cluster");
  const fs::path job = dir / "job.yaml";
  const std::string cluster = std::string(TRAINCTL_SOURCE_DIR) + "/configs/clusters/dgx-a100.yaml";
  auto bubble_of = [&](std::string schedule) {
    if (schedule == "zbv") schedule += ", virtual_stages: 2";
    write_text(job,
               "name: big\nmodel: {n_layer: 8, n_head: 16, d_model: 2048, seq_len: 2048, "
               "vocab_size: 51200}\nparallel: {dp: 4, tp: 8, pp: 2, schedule: " +
                   schedule +
                   "}\ntraining: {micro_batch_size: 1, global_batch_size: 32, "
                   "activation_checkpointing: full}\n");
    ProcResult r = run_trainctl({"plan", job.string(), "--cluster", cluster, "--json"}, dir.path());
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    return nlohmann::json::parse(r.out)["cost"]["bubble_fraction"].get<double>();
  };
  // 8 micro-batches per DP rank: (2-1)/(8+2-1) and (2-1)/(3*8+2-1).
  CHECK(bubble_of("1f1b") == Approx(1.0 / 9));
  CHECK(bubble_of("zb1p") == Approx(1.0 / 25));
  // zbv, m = 8 >= 2p-1: (2-1)/(6*8+2-1).
  CHECK(bubble_of("zbv") == Approx(1.0 / 49));
}

TEST_CASE("plan draws zbv's V: two chunks per stage, B and W, its smaller bubble",
          "[plan][integration][zero_bubble][zbv]") {
  TempDir dir("planzbv");
  const fs::path job = dir / "job.yaml";
  write_text(job,
             "name: zbv\nmodel: {vocab_size: 64, seq_len: 16, n_layer: 8, n_head: 4, "
             "d_model: 32}\n"
             "parallel: {pp: 4, schedule: zbv, virtual_stages: 2}\n"
             "training: {micro_batch_size: 1, global_batch_size: 8}\n");
  const ProcResult r = run_trainctl({"plan", job.string()}, dir.path());
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("stage 0: embedding, chunk a (virtual 0): block 0, chunk b "
                                    "(virtual 7): block 7, LM head"));
  CHECK_THAT(r.out, Catch::Contains("stage 3: chunk a (virtual 3): block 3, chunk b (virtual 4)"));
  CHECK_THAT(r.out, Catch::Contains("schedule zbv, 4 stages x 2 chunks in V order, 8 "
                                    "micro-batches: bubble 5.9%"));
  CHECK_THAT(r.out, Catch::Contains("stage 3 | ... ... ... F0a F0b F1a F1b"));
  const ProcResult j = run_trainctl({"plan", job.string(), "--json"}, dir.path());
  REQUIRE(j.exit_code == 0);
  const auto plan = nlohmann::json::parse(j.out);
  CHECK(plan["schedule"] == "zbv");
  CHECK(plan["bubble"].get<double>() == Approx(3.0 / 51));
  CHECK(plan["memory_mb"].size() == 4);
}
