// One job per run directory (issue 15): a second `trainctl train` on a running job's
// run_dir exits 2 at once naming the first job, and the first one finishes unharmed; a
// launcher killed with SIGKILL leaves nothing that blocks the next run.
#include <catch2/catch.hpp>
#include <map>
#include <nlohmann/json.hpp>

#include "integration/helpers.h"

using namespace trainctl::test;
using namespace std::chrono_literals;

namespace {

// Long enough (several seconds on 2 busy cores) for a second job to try its luck.
fs::path long_job(const fs::path& dir, const std::string& name, int steps) {
  const fs::path file = dir / (name + ".yaml");
  write_text(file, "name: " + name +
                       "\nseed: 3\n"
                       "model: {vocab_size: 64, seq_len: 64, n_layer: 2, n_head: 2, d_model: 64}\n"
                       "data: {type: synthetic}\n"
                       "training: {steps: " +
                       std::to_string(steps) +
                       ", micro_batch_size: 8, global_batch_size: 8, threads: 1}\n"
                       "optimizer: {lr: 1.0e-3, warmup_steps: 2}\n"
                       "checkpoint: {every_steps: 50}\n"
                       "logging: {every_steps: 1}\n"
                       "runtime: {comm_timeout_s: 30}\n");
  return file;
}

size_t metrics_lines(const fs::path& run_dir) {
  std::istringstream in(read_text(run_dir / "metrics.jsonl"));
  size_t n = 0;
  for (std::string line; std::getline(in, line);) n += line.empty() ? 0 : 1;
  return n;
}

// How many times each step appears in metrics.jsonl.
std::map<int64_t, int> step_counts(const fs::path& run_dir) {
  std::map<int64_t, int> counts;
  std::istringstream in(read_text(run_dir / "metrics.jsonl"));
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) ++counts[nlohmann::json::parse(line)["step"].get<int64_t>()];
  }
  return counts;
}

}  // namespace

TEST_CASE("a second train on a running job's run_dir exits 2 naming the first job",
          "[launch][train]") {
  TempDir dir("lock");
  const int steps = 600;
  const fs::path job = long_job(dir.path(), "locked", steps);
  const fs::path run = dir / "runs/locked";
  Proc first({"train", job.string()}, dir.path());
  REQUIRE(eventually([&] { return metrics_lines(run) >= 1; }, 60s));
  const std::string resolved = read_text(run / "config.resolved.yaml");

  for (const char* resume : {"auto", "none"}) {
    const ProcResult second =
        run_trainctl({"train", job.string(), "--resume", resume}, dir.path(), 20s);
    INFO(second.err);
    CHECK(second.exit_code == 2);
    CHECK(second.seconds < 10.0);
    CHECK_THAT(second.err, Catch::Contains("error: run_dir " + run.string() +
                                           " is in use by another trainctl job: pid " +
                                           std::to_string(first.pid()) + " on host "));
    CHECK_THAT(second.err, Catch::Contains("started "));
    CHECK_THAT(second.err, Catch::Contains("job 'locked' (" + job.string() + ")"));
  }
  // The refused jobs wrote nothing: the first job's resolved config and log are its own.
  CHECK(read_text(run / "config.resolved.yaml") == resolved);
  CHECK(metrics_lines(run) < static_cast<size_t>(steps));  // the first was still running

  const ProcResult r = first.wait(300s);
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  const std::map<int64_t, int> counts = step_counts(run);
  CHECK(counts.size() == static_cast<size_t>(steps));
  for (const auto& [step, n] : counts) {
    INFO("step " << step);
    CHECK(n == 1);
  }
  CHECK(counts.begin()->first == 1);
  CHECK(counts.rbegin()->first == steps);
  const std::string log = read_text(run / "logs/rank0.log");
  CHECK(log.find("worker started: pid") == log.rfind("worker started: pid"));  // one worker
}

TEST_CASE("after its launcher is killed with SIGKILL a run_dir takes a new job at once",
          "[launch][train]") {
  TempDir dir("lock-killed");
  const fs::path job = long_job(dir.path(), "killed", 100000);
  const fs::path run = dir / "runs/killed";
  Proc first({"train", job.string()}, dir.path());
  REQUIRE(eventually([&] { return metrics_lines(run) >= 1; }, 60s));
  first.signal(SIGKILL);
  first.wait(10s);
  REQUIRE(eventually([&] { return processes_mentioning(dir.path().string()).empty(); }, 10s));
  // The dead launcher's lock file is still there, naming it; it must not matter.
  REQUIRE_THAT(read_text(run / ".trainctl.lock"),
               Catch::Contains("pid: " + std::to_string(first.pid()) + "\n"));

  const ProcResult again = run_trainctl(
      {"train", job.string(), "--resume", "none", "--overwrite", "--set", "training.steps=5"},
      dir.path(), 120s);
  INFO(again.out << again.err);
  CHECK(again.exit_code == 0);
  CHECK_THAT(read_text(run / ".trainctl.lock"),
             !Catch::Contains("pid: " + std::to_string(first.pid()) + "\n"));
}
