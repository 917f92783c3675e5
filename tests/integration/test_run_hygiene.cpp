// What a run leaves behind when it is resumed, restarted, refused or stopped (issue 15):
// metrics.jsonl shows each step once and never a torn line, leftover .tmp_step_* directories
// go at the next start, a changed seed is announced, a finished run has nothing to train and
// says so, a job its workers refuse leaves the run's config.resolved.yaml and logs as they
// were, and a second stop signal still ends with a clear account of what was saved.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "integration/helpers.h"

using namespace trainctl::test;
using namespace std::chrono_literals;

namespace {

fs::path job(const fs::path& dir) {
  return write_small_job(
      dir, {.name = "hygiene",
            .runtime = "{comm_timeout_s: 60, max_restarts: 1, comm_selftest: false}"});
}

ProcResult train(const fs::path& dir, const fs::path& run, std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"train", job(dir).string(), "--set", "run_dir=" + run.string()};
  args.insert(args.end(), extra.begin(), extra.end());
  Proc p(args, dir);
  return p.wait(120s);
}

// The "step" of every line of metrics.jsonl; a line that is not a JSON object fails the test.
std::vector<int64_t> logged_steps(const fs::path& run) {
  std::vector<int64_t> steps;
  std::istringstream in(read_text(run / "metrics.jsonl"));
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    INFO("metrics.jsonl line: " << line);
    REQUIRE(j.is_object());
    steps.push_back(j.at("step").get<int64_t>());
  }
  return steps;
}

const std::vector<int64_t> kSteps1To8 = {1, 2, 3, 4, 5, 6, 7, 8};

}  // namespace

TEST_CASE("a resumed run logs each step once, cuts a torn line and removes leftover saves",
          "[resume][integration]") {
  TempDir dir("hygiene");
  const fs::path run = dir / "run";
  REQUIRE(train(dir.path(), run).exit_code == 0);
  REQUIRE(logged_steps(run) == kSteps1To8);

  // A crash mid-write left half a line; a crash mid-save left a temporary directory.
  {
    std::ofstream out(run / "metrics.jsonl", std::ios::app);
    out << R"({"step":9,"loss":3.1)";
  }
  fs::create_directories(run / "checkpoints" / ".tmp_step_00000012");
  // Resuming from step 4 trains 5..8 again: their old lines go.
  const fs::path step4 = run / "checkpoints" / "step_00000004";
  const ProcResult r = train(dir.path(), run, {"--resume", step4.string()});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(logged_steps(run) == kSteps1To8);
  CHECK_THAT(r.out, Catch::Contains("removed " + (run / "checkpoints/.tmp_step_00000012").string() +
                                    ": an unfinished checkpoint left by an interrupted save"));
  CHECK_FALSE(fs::exists(run / "checkpoints" / ".tmp_step_00000012"));
  const std::string log = read_text(run / "logs" / "rank0.log");
  CHECK_THAT(log, Catch::Contains("metrics.jsonl ended in a torn line"));
  CHECK_THAT(log, Catch::Contains("dropped 4 line(s) of steps after 4"));
}

TEST_CASE("resuming a finished run says there is nothing to train and exits 0",
          "[resume][integration]") {
  TempDir dir("hygiene-done");
  const fs::path run = dir / "run";
  REQUIRE(train(dir.path(), run).exit_code == 0);
  const std::string model = read_text(run / "model.safetensors");
  const ProcResult again = train(dir.path(), run);
  INFO(again.out << again.err);
  CHECK(again.exit_code == 0);
  CHECK_THAT(again.out, Catch::Contains("nothing to train: the checkpoint is at step 8 of 8"));
  // No summary of zero steps (it printed "done: 8 steps in 0.0 s | ... 480000000000 tokens/s").
  CHECK_THAT(again.out, !Catch::Contains("done:") && !Catch::Contains(" tokens/s ("));
  CHECK(logged_steps(run) == kSteps1To8);
  CHECK(read_text(run / "model.safetensors") == model);
}

TEST_CASE("a changed seed on resume is announced", "[resume][integration]") {
  TempDir dir("hygiene-seed");
  const fs::path run = dir / "run";
  REQUIRE(train(dir.path(), run, {"--set", "training.steps=4"}).exit_code == 0);
  const ProcResult r = train(dir.path(), run, {"--set", "seed=6"});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("seed changed from 5 to 6: from step 5 the data is drawn "
                                    "with the new seed"));
  // The same seed says nothing.
  const ProcResult same = train(dir.path(), run, {"--set", "seed=6", "--set", "training.steps=8"});
  CHECK_THAT(same.out, !Catch::Contains("seed changed"));
}

TEST_CASE("a job its workers refuse leaves the run's resolved config and logs as they were",
          "[resume][integration]") {
  TempDir dir("hygiene-refused");
  const fs::path run = dir / "run";
  REQUIRE(train(dir.path(), run).exit_code == 0);
  const std::string config = read_text(run / "config.resolved.yaml");
  const std::string log = read_text(run / "logs" / "rank0.log");
  // Another model: refused (since issue 37 by the launcher, from the checkpoint's
  // metadata.json, before any worker starts; before that rank 0 refused it, and the reason
  // had to reach the console whichever rank the launcher heard from first).
  const ProcResult r = train(dir.path(), run,
                             {"--set", "model.n_layer=3", "--set", "parallel.dp=2", "--set",
                              "training.micro_batch_size=1", "--set", "training.steps=12"});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.out + r.err, Catch::Contains("holds another model") &&
                                Catch::Contains("n_layer 2") && Catch::Contains("n_layer 3"));
  CHECK_THAT(r.err, !Catch::Contains("restarting"));
  CHECK(read_text(run / "config.resolved.yaml") == config);
  CHECK_THAT(read_text(run / "logs" / "rank0.log"), Catch::StartsWith(log));  // appended only
}

TEST_CASE("a second stop signal kills the workers and says what was saved",
          "[launch][integration]") {
  TempDir dir("hygiene-twice");
  const fs::path run = dir / "run";
  Proc p({"train", job(dir.path()).string(), "--set", "run_dir=" + run.string(), "--set",
          "parallel.dp=2", "--set", "training.micro_batch_size=1", "--set",
          "training.steps=1000000", "--set", "checkpoint.every_steps=0"},
         dir.path());
  REQUIRE(eventually(
      [&] { return read_text(run / "logs" / "rank0.log").find("step 1/") != std::string::npos; },
      30s));
  // A stopped rank 1 holds rank 0 in a collective: neither reaches the step boundary where a
  // stop is honoured, so only the second signal ends the stop.
  const pid_t rank1 = worker_pid_from_log(run / "logs" / "rank1.log");
  REQUIRE(rank1 > 0);
  ::kill(rank1, SIGSTOP);
  p.signal(SIGTERM);
  std::this_thread::sleep_for(1s);
  p.signal(SIGTERM);
  const ProcResult r = p.wait(30s);
  ::kill(rank1, SIGCONT);  // should it have survived the launcher (it must not)
  INFO(r.out << r.err);
  CHECK_FALSE(r.timed_out);
  CHECK(r.exit_code == 4);
  CHECK_THAT(r.err, Catch::Contains("received SIGTERM again: killing the workers now"));
  CHECK_THAT(r.err, !Catch::Contains("workers still running after"));
  CHECK_THAT(r.err, Catch::Contains("no stop checkpoint was written"));
  CHECK_THAT(r.err, Catch::Contains("no checkpoint has been saved"));
  CHECK(eventually([&] { return processes_mentioning(run.string()).empty(); }, 5s));
}

TEST_CASE("a data file refused before launch leaves an existing run untouched",
          "[resume][integration]") {
  TempDir dir("hygiene-data");
  const fs::path run = dir / "run";
  REQUIRE(train(dir.path(), run).exit_code == 0);
  const std::string config = read_text(run / "config.resolved.yaml");
  const std::string log = read_text(run / "logs" / "rank0.log");
  write_text(dir / "odd.bin", "abc");  // raw uint16 tokens: an odd size is refused
  const ProcResult r =
      train(dir.path(), run,
            {"--set", "data.type=tokens", "--set", "data.path=" + (dir / "odd.bin").string()});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("odd.bin"));
  CHECK(read_text(run / "config.resolved.yaml") == config);
  CHECK(read_text(run / "logs" / "rank0.log") == log);
}

TEST_CASE("ckpt verify exits 2 for a damaged shard and for unparseable metadata alike",
          "[ckpt][integration]") {
  TempDir dir("hygiene-verify");
  const fs::path run = dir / "run";
  REQUIRE(train(dir.path(), run).exit_code == 0);
  const fs::path step4 = run / "checkpoints" / "step_00000004";
  const fs::path step8 = run / "checkpoints" / "step_00000008";
  {  // a flipped byte in the middle of step 8's shard
    std::fstream f(step8 / "rank_00000.safetensors",
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(fs::file_size(step8 / "rank_00000.safetensors") / 2));
    const char c = static_cast<char>(f.peek());
    f.seekp(f.tellg());
    f.put(static_cast<char>(c ^ 0x10));
  }
  write_text(step4 / "metadata.json", "{not json");
  for (const fs::path& target : {step8, step4, run}) {
    const ProcResult r = run_trainctl({"ckpt", "verify", target.string()}, dir.path());
    INFO(target << "\n" << r.out << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.out, Catch::Contains("DAMAGED"));
  }
  // Every checkpoint damaged: --resume auto refuses (exit 2) naming them, trains nothing.
  const ProcResult resumed = train(dir.path(), run);
  INFO(resumed.out << resumed.err);
  CHECK(resumed.exit_code == 2);
  CHECK_THAT(resumed.out + resumed.err, Catch::Contains("step_00000004") &&
                                            Catch::Contains("step_00000008") &&
                                            Catch::Contains("all 2 are damaged"));
}
