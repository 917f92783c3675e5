// `trainctl plan`: the pipeline schedule of a job spec, simulated and drawn, without
// starting anything.
#include <catch2/catch.hpp>

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
  CHECK_THAT(r.out, Catch::Contains("schedule 1f1b, 4 stages, 8 micro-batches: bubble 27.3%"));
  CHECK_THAT(r.out, Catch::Contains("peak activations per stage [4, 3, 2, 1]"));
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
             Catch::Contains("schedule gpipe, 4 stages, 2 micro-batches: bubble 60.0%, peak "
                             "activations per stage [2, 2, 2, 2]"));
}

TEST_CASE("plan works without pipeline parallelism", "[plan][integration]") {
  TempDir dir("plan1");
  const fs::path job = write_job(dir.path(), "pp1", 2, 1, 1);
  ProcResult r = run_trainctl({"plan", job.string()}, dir.path());
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("1 stage, 1 micro-batch: bubble 0.0%"));
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
