// `train --profile A:B`: every rank's timeline of steps A..B merged into run_dir/trace.json
// (Chrome trace events). The pipeline's events on each stage must follow the stage's
// schedule exactly, as make_schedule lists it.
#include <catch2/catch.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "integration/helpers.h"
#include "parallel/pipeline_schedule.h"

using namespace trainctl::test;
using trainctl::parallel::Instruction;

TEST_CASE("train with --profile writes one trace of every rank and pipeline events run 1F1B",
          "[trace][integration]") {
  TempDir dir("trace");
  // dp 2 x pp 2, 4 micro-batches per step (global 16 = micro 2 x 4 x dp 2).
  const fs::path job = dir / "job.yaml";
  write_text(job,
             "name: traced\nmodel: {vocab_size: 64, seq_len: 16, n_layer: 2, n_head: 2, "
             "d_model: 32}\ndata: {type: synthetic}\nparallel: {dp: 2, pp: 2, schedule: 1f1b}\n"
             "training: {steps: 4, micro_batch_size: 2, global_batch_size: 16}\n"
             "runtime: {comm_selftest: false}\nlogging: {tensorboard: false}\n");
  ProcResult r = run_trainctl({"train", job.string(), "--profile", "2:3"}, dir.path(),
                              std::chrono::seconds(120));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("trace: "));
  CHECK_THAT(r.out, Catch::Contains("residual error <= "));
  const fs::path trace = dir / "runs/traced/trace.json";
  REQUIRE(fs::exists(trace));
  const auto doc = nlohmann::json::parse(read_text(trace));
  CHECK_THAT(doc["otherData"]["clock_alignment"].get<std::string>(),
             Catch::Contains("aligned to rank 0"));

  std::set<int> ranks, steps;
  std::set<std::string> names, groups;
  // Per rank, step 2's pipeline instructions in time order.
  std::map<int, std::vector<std::pair<double, nlohmann::json>>> pipeline;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] != "X") continue;
    const int rank = e["pid"].get<int>();
    ranks.insert(rank);
    steps.insert(e["args"]["step"].get<int>());
    names.insert(e["name"].get<std::string>());
    if (e["args"].contains("group")) groups.insert(e["args"]["group"].get<std::string>());
    CHECK(e["dur"].get<double>() >= 0);
    if (e["cat"] == "pipeline" && e["args"]["step"] == 2) {
      pipeline[rank].emplace_back(e["ts"].get<double>(), e);
    }
  }
  CHECK(ranks == std::set<int>{0, 1, 2, 3});
  CHECK(steps == std::set<int>{2, 3});  // only the profiled steps
  for (const char* n : {"forward", "backward", "send_activation", "recv_activation", "send_grad",
                        "recv_grad", "allreduce", "optimizer", "data.wait", "checkpoint"}) {
    INFO(n);
    CHECK(names.count(n) == 1);
  }
  CHECK(groups.count("dp[0]") == 1);
  CHECK(groups.count("pp[0]") == 1);
  CHECK(groups.count("world") == 1);

  // Ranks 0, 1 are stage 0 (dp 0, 1); ranks 2, 3 stage 1: rank = (pp * dp + dp_rank) * tp.
  const auto schedules =
      trainctl::parallel::make_all_schedules(trainctl::parallel::ScheduleKind::one_f_one_b, 2, 4);
  for (int rank = 0; rank < 4; ++rank) {
    auto& events = pipeline[rank];
    std::sort(events.begin(), events.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    const std::vector<Instruction>& want = schedules[static_cast<size_t>(rank / 2)];
    REQUIRE(events.size() == want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      INFO("rank " << rank << " instruction " << i);
      CHECK(events[i].second["name"] == trainctl::parallel::to_string(want[i].kind));
      if (want[i].micro_batch >= 0) CHECK(events[i].second["args"]["mb"] == want[i].micro_batch);
    }
  }
}

TEST_CASE("train refuses a bad --profile or profile_steps before anything starts",
          "[trace][integration]") {
  TempDir dir("trace-bad");
  const fs::path job = dir / "job.yaml";
  write_text(job, "name: bad\ntraining: {steps: 4}\n");
  ProcResult syntax = run_trainctl({"train", job.string(), "--profile", "3-4"}, dir.path());
  CHECK(syntax.exit_code == 2);
  CHECK_THAT(syntax.err, Catch::Contains("expected A:B"));
  ProcResult range = run_trainctl({"train", job.string(), "--profile", "3:9"}, dir.path());
  CHECK(range.exit_code == 2);
  CHECK_THAT(range.err, Catch::Contains("logging.profile_steps"));
  CHECK_THAT(range.err, Catch::Contains("<= training.steps (4)"));
  CHECK_FALSE(fs::exists(dir / "runs"));
}
