// `trainctl plan`: the rank map, the layer partition and the pipeline schedule of a job spec,
// simulated and drawn, without starting anything.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "integration/helpers.h"

using namespace trainctl::test;

namespace {

// Lines of `text` that start with `prefix`.
int count_lines_starting(const std::string& text, const std::string& prefix) {
  int n = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) == 0) ++n;
  }
  return n;
}

}  // namespace

TEST_CASE("plan draws a 4-stage 1F1B schedule of 8 micro-batches", "[plan][integration]") {
  TempDir dir("plan");
  // micro_batch_size 4 × 8 accumulation steps × dp 1 = global batch 32: m = 8.
  const fs::path job = dir / "pp4.yaml";
  write_text(job,
             "name: pp4\nmodel: {n_layer: 4}\nparallel: {pp: 4, schedule: 1f1b}\n"
             "training: {micro_batch_size: 4, global_batch_size: 32}\n");
  ProcResult r = run_trainctl({"plan", job.string()}, dir.path());
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  // Rank map: one line per world rank with its (dp, tp, pp) coordinates.
  CHECK_THAT(r.out, Catch::Contains("rank map (world 4 = dp 1 x tp 1 x pp 4; rank = (pp_rank * dp "
                                    "+ dp_rank) * tp + tp_rank):\n rank   dp   tp   pp\n"
                                    "    0    0    0    0\n    1    0    0    1\n"));
  CHECK_THAT(r.out, Catch::Contains("    3    0    0    3\n"));
  // Layer partition: one block per stage, embedding first, LM head last (its cost counts).
  CHECK_THAT(r.out, Catch::Contains("layers (4 blocks, 4 stages):\n"
                                    " stage 0: embedding, block 0; cost 1.00\n"
                                    " stage 1: block 1; cost 1.00\n"));
  CHECK_THAT(r.out, Catch::Contains(" stage 3: block 3, LM head; cost 1.14\n"));
  CHECK_THAT(r.out, Catch::Contains("does 1.10x the mean"));
  // The simulated bubble next to the closed form.
  CHECK_THAT(r.out,
             Catch::Contains("schedule 1f1b, 4 stages, 8 micro-batches: bubble 27.3% "
                             "(theory (p-1)/(m+p-1) = 27.3%)\n"
                             "peak activations per stage [4, 3, 2, 1] (micro-batches held)"));
  CHECK(count_lines_starting(r.out, "stage ") == 4);
  // Stage 3 runs its first forward after three time units of fill.
  CHECK_THAT(r.out, Catch::Contains("stage 3 | .. .. .. F0 B0 -- F1 B1 --"));
  CHECK_FALSE(fs::exists(dir / "runs"));  // nothing launched

  // The same pipeline as GPipe holds all 8 micro-batches on every stage, same bubble.
  ProcResult gpipe = run_trainctl(
      {"plan", job.string(), "--set", "parallel.schedule=gpipe", "--micro-batches", "2"},
      dir.path());
  INFO(gpipe.err);
  REQUIRE(gpipe.exit_code == 0);
  // (4 - 1) / (2 + 4 - 1) = 60%.
  CHECK_THAT(gpipe.out,
             Catch::Contains("schedule gpipe, 4 stages, 2 micro-batches: bubble 60.0% (theory "
                             "(p-1)/(m+p-1) = 60.0%)\npeak activations per stage [2, 2, 2, 2]"));
}

TEST_CASE("plan draws the interleaved schedule with its chunks", "[plan][integration]") {
  TempDir dir("planinter");
  // 8 blocks over 4 stages × 2 chunks, 8 micro-batches.
  const fs::path job = dir / "inter.yaml";
  write_text(job,
             "name: inter\nmodel: {n_layer: 8}\n"
             "parallel: {pp: 4, schedule: interleaved, virtual_stages: 2}\n"
             "training: {micro_batch_size: 4, global_batch_size: 32}\n");
  ProcResult r = run_trainctl({"plan", job.string()}, dir.path());
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  // Chunk c of stage s is virtual stage c * 4 + s: stage 0 holds blocks 0 and 4.
  CHECK_THAT(r.out, Catch::Contains("layers (8 blocks, 4 stages x 2 chunks: chunk c of stage s is "
                                    "virtual stage c*4 + s):\n"
                                    " stage 0: embedding, chunk a (virtual 0): block 0, chunk b "
                                    "(virtual 4): block 4; cost 2.00\n"));
  CHECK_THAT(r.out, Catch::Contains(" stage 3: chunk a (virtual 3): block 3, chunk b (virtual 7): "
                                    "block 7, LM head; cost 2.14\n"));
  // (4 - 1) / (2 × 8 + 4 - 1) = 15.8%, against 1F1B's 27.3%; stage 0 holds its
  // (4 - 1) × 2 + (2 - 1) × 4 = 10 warm-up chunks and one more.
  CHECK_THAT(r.out,
             Catch::Contains("schedule interleaved, 4 stages x 2 chunks, 8 micro-batches: bubble "
                             "15.8% (theory (p-1)/(V*m+p-1) = 15.8%; 1f1b: 27.3%)\n"
                             "peak activations per stage [11, 9, 7, 5] (micro-batch chunks held, "
                             "each 1/2 of the stage's layers)"));
  CHECK_THAT(r.out, Catch::Contains("chunk forward F<mb><chunk> 1"));
  CHECK(count_lines_starting(r.out, "stage ") == 4);
  // Stage 3 runs the last virtual stage (chunk b): each forward there is followed by its
  // backward at once.
  CHECK_THAT(r.out, Catch::Contains("stage 3 | ... ... ... F0a F1a F2a F3a F0b B0b --- F1b B1b"));

  // Micro-batches come in groups of pp.
  ProcResult six = run_trainctl({"plan", job.string(), "--micro-batches", "6"}, dir.path());
  CHECK(six.exit_code == 2);
  CHECK_THAT(six.err, Catch::Contains("multiple"));
  // One stage has nothing to interleave.
  ProcResult one = run_trainctl({"plan", job.string(), "--set", "parallel.pp=1"}, dir.path());
  CHECK(one.exit_code == 2);
  CHECK_THAT(one.err, Catch::Contains("parallel.pp"));
}

TEST_CASE("plan maps every rank of a 3D layout", "[plan][integration]") {
  TempDir dir("plan3d");
  const fs::path job = write_job(dir.path(), "threed", 2, 2, 2);
  ProcResult r = run_trainctl({"plan", job.string()}, dir.path());
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("rank map (world 8 = dp 2 x tp 2 x pp 2;"));
  // TP fastest, then DP, then PP: rank 5 is (dp 0, tp 1, pp 1), rank 6 (dp 1, tp 0, pp 1).
  CHECK_THAT(r.out, Catch::Contains("    5    0    1    1\n    6    1    0    1\n"));
  CHECK_THAT(r.out, Catch::Contains(" stage 0: embedding, block 0; cost 1.00\n"));
  CHECK_THAT(r.out, Catch::Contains(" stage 1: block 1, LM head; cost "));
}

TEST_CASE("plan works without pipeline parallelism", "[plan][integration]") {
  TempDir dir("plan1");
  const fs::path job = write_job(dir.path(), "pp1", 2, 1, 1);
  ProcResult r = run_trainctl({"plan", job.string()}, dir.path());
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("1 stage, 1 micro-batch: bubble 0.0%"));
  CHECK_THAT(r.out, Catch::Contains(" stage 0: embedding, blocks 0-1 (2), LM head; cost "));
  CHECK_THAT(r.out, Catch::Contains("stage 0 | F0 B0 -- |\n"));
  CHECK(count_lines_starting(r.out, "stage ") == 1);
}

TEST_CASE("plan cuts a long timeline and says so", "[plan][integration]") {
  TempDir dir("plancut");
  const fs::path job = write_job(dir.path(), "long", 1, 1, 2);
  ProcResult r = run_trainctl({"plan", job.string(), "--micro-batches", "40"}, dir.path());
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("(first 64 of 123 time units shown"));
  CHECK(count_lines_starting(r.out, "stage ") == 2);
}

TEST_CASE("plan rejects a bad spec or option with exit code 2", "[plan][integration]") {
  TempDir dir("planbad");
  const fs::path job = write_job(dir.path(), "bad", 1, 1, 2);
  ProcResult too_deep = run_trainctl({"plan", job.string(), "--set", "parallel.pp=3"}, dir.path());
  CHECK(too_deep.exit_code == 2);
  CHECK_THAT(too_deep.err, Catch::Contains("parallel.pp"));

  ProcResult schedule =
      run_trainctl({"plan", job.string(), "--set", "parallel.schedule=zigzag"}, dir.path());
  CHECK(schedule.exit_code == 2);
  CHECK_THAT(schedule.err, Catch::Contains("parallel.schedule"));

  ProcResult zero = run_trainctl({"plan", job.string(), "--micro-batches", "0"}, dir.path());
  CHECK(zero.exit_code == 2);

  ProcResult missing = run_trainctl({"plan", "no-such-job.yaml"}, dir.path());
  CHECK(missing.exit_code == 2);
  CHECK_THAT(missing.err, Catch::Contains("no-such-job.yaml"));

  ProcResult help = run_trainctl({"plan", "--help"}, dir.path());
  CHECK(help.exit_code == 0);
  CHECK_THAT(help.out, Catch::Contains("Example:") && Catch::Contains("--micro-batches"));
}

TEST_CASE("plan and validate size Llama 3 8B from its preset", "[plan][integration][llama]") {
  TempDir dir("plan");
  // Llama 3 8B on 256 GPUs: tp 8 splits its 8 k/v heads one per rank, pp 4 its 32 layers.
  const fs::path job = dir / "llama3.yaml";
  write_text(job,
             "name: llama3\ndevice: cuda\nmodel: {preset: llama3-8b}\n"
             "parallel: {dp: 8, tp: 8, pp: 4}\nprecision: {compute: bf16}\n"
             "training: {micro_batch_size: 1, global_batch_size: 256,"
             " activation_checkpointing: selective}\n");
  ProcResult r = run_trainctl({"plan", job.string(), "--json"}, dir.path());
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const auto plan = nlohmann::json::parse(r.out);
  // Stage 0 holds the embedding (128256 x 4096 / tp) and 8 layers of 218 M weights / tp:
  // on device: cuda with bf16, 541.375 MiB of bf16 parameters per rank and their fp32
  // master copy, 1082.75 MiB (parallel/mixed_params.h, as plan/memory_plan.h counts it).
  const auto& stage0 = plan["memory_mb"][0];
  INFO(stage0.dump());
  CHECK(stage0["parameters"].get<double>() == Approx(541.375).epsilon(1e-4));
  CHECK(stage0["master_weights"].get<double>() == Approx(1082.75).epsilon(1e-4));

  // One worker's view: 8.03 B parameters (Meta's count), refused for memory with options.
  write_text(job, "name: llama3\nmodel: {preset: llama3-8b}\n");
  ProcResult v =
      run_trainctl({"validate", job.string(), "--set", "runtime.memory_limit_mb=1e9"}, dir.path());
  INFO(v.out << v.err);
  CHECK_THAT(v.out, Catch::Contains("model:      llama llama3-8b: 32 layers, 32 heads x 128") &&
                        Catch::Contains("8 k/v heads, SwiGLU 14336, rope_theta 500000") &&
                        Catch::Contains("parameters: 8.03B"));

  // tp must divide the 8 k/v heads.
  write_text(job, "name: llama3\ndevice: cuda\nmodel: {preset: llama3-8b}\nparallel: {tp: 16}\n");
  ProcResult bad = run_trainctl({"plan", job.string()}, dir.path());
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Catch::Contains("must divide model.n_kv_head (8)"));
}
