// One history per run directory (issue 37): `train --resume none` on a run_dir that holds
// an earlier run is refused and leaves it untouched; with --overwrite the earlier run moves,
// whole, to run_dir/previous-<time>/ and the new run starts in an empty run_dir, so
// metrics, checkpoints and TensorBoard events never mix two runs.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "integration/helpers.h"

using namespace trainctl::test;
using namespace std::chrono_literals;

namespace {

ProcResult train(const fs::path& dir, const fs::path& job, std::vector<std::string> extra) {
  std::vector<std::string> args = {"train", job.string()};
  args.insert(args.end(), extra.begin(), extra.end());
  return Proc(args, dir).wait(120s);
}

std::vector<int64_t> steps_in(const fs::path& metrics) {
  std::vector<int64_t> steps;
  std::istringstream in(read_text(metrics));
  for (std::string line; std::getline(in, line);) {
    steps.push_back(nlohmann::json::parse(line).at("step").get<int64_t>());
  }
  return steps;
}

std::vector<fs::path> previous_runs(const fs::path& run) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(run)) {
    if (e.path().filename().string().rfind("previous-", 0) == 0) out.push_back(e.path());
  }
  return out;
}

}  // namespace

TEST_CASE("train --resume none refuses a run_dir with history unless --overwrite moves it aside",
          "[resume][integration]") {
  TempDir dir("history");
  const fs::path job = write_small_job(dir.path(), {.name = "hist"});
  const fs::path run = dir / "runs/hist";
  const std::vector<int64_t> all = {1, 2, 3, 4, 5, 6, 7, 8};
  REQUIRE(train(dir.path(), job, {}).exit_code == 0);
  REQUIRE(steps_in(run / "metrics.jsonl") == all);
  const std::string metrics_before = read_text(run / "metrics.jsonl");

  // Refused: exit 2, what run_dir holds, the three ways on; nothing written.
  const ProcResult refused = train(dir.path(), job, {"--resume", "none"});
  INFO(refused.out << refused.err);
  CHECK(refused.exit_code == 2);
  CHECK_THAT(refused.err,
             Catch::Contains("run_dir " + run.string() +
                             " already holds a run: 2 checkpoints "
                             "(newest step_00000008), metrics.jsonl (8 lines) and TensorBoard "
                             "events") &&
                 Catch::Contains("--resume none --overwrite") && Catch::Contains("--resume auto"));
  CHECK(read_text(run / "metrics.jsonl") == metrics_before);
  CHECK(previous_runs(run).empty());

  // --overwrite without --resume none is a usage error, before anything starts.
  const ProcResult lone = train(dir.path(), job, {"--overwrite"});
  CHECK(lone.exit_code == 2);
  CHECK_THAT(lone.err, Catch::Contains("use it with --resume none"));
  CHECK(read_text(run / "metrics.jsonl") == metrics_before);

  // Start over: the old run is kept whole beside the new one, which begins at step 1.
  const ProcResult over =
      train(dir.path(), job, {"--resume", "none", "--overwrite", "--set", "training.steps=4"});
  INFO(over.out << over.err);
  REQUIRE(over.exit_code == 0);
  CHECK_THAT(over.out + over.err, Catch::Contains("was moved to " + (run / "previous-").string()));
  const std::vector<fs::path> previous = previous_runs(run);
  REQUIRE(previous.size() == 1);
  CHECK(read_text(previous[0] / "metrics.jsonl") == metrics_before);
  CHECK(fs::is_directory(previous[0] / "checkpoints/step_00000008"));
  CHECK(fs::is_directory(previous[0] / "tb"));
  CHECK(fs::is_regular_file(previous[0] / "logs/rank0.log"));
  CHECK(steps_in(run / "metrics.jsonl") == std::vector<int64_t>{1, 2, 3, 4});
  CHECK(fs::is_directory(run / "checkpoints/step_00000004"));
  CHECK_FALSE(fs::exists(run / "checkpoints/step_00000008"));
  // TensorBoard: the new run's one event file, none of the old run's.
  CHECK(std::distance(fs::directory_iterator(run / "tb"), fs::directory_iterator{}) == 1);
  CHECK(std::distance(fs::directory_iterator(previous[0] / "tb"), fs::directory_iterator{}) == 1);

  // A run_dir without history (a start that never took a step) needs no --overwrite.
  const fs::path fresh = dir / "runs/fresh";
  fs::create_directories(fresh / "logs");
  write_text(fresh / "config.resolved.yaml", "name: old\n");
  const ProcResult first = train(
      dir.path(), job,
      {"--resume", "none", "--set", "run_dir=" + fresh.string(), "--set", "training.steps=2"});
  INFO(first.out << first.err);
  CHECK(first.exit_code == 0);
  CHECK(previous_runs(fresh).empty());
}
