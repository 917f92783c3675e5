// Checkpoints and resume through the real binary (DESIGN.md "Resume equivalence"):
// stopping and resuming gives bitwise the uninterrupted run on the same layout and the
// same losses (float tolerance) on any other layout; a worker killed by SIGKILL is
// restarted from the latest checkpoint with bitwise-identical results; a crash while a
// checkpoint is written leaves the previous one intact; a damaged newest checkpoint is
// detected and skipped.
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "integration/helpers.h"

using namespace trainctl::test;
using nlohmann::json;

namespace {

// The loss of each step (the last line of a step wins: a resumed run logs again the steps
// after its checkpoint... it never does, but a restart after a crash may).
std::map<int, double> losses_of(const fs::path& run) {
  std::map<int, double> out;
  std::istringstream in(read_text(run / "metrics.jsonl"));
  for (std::string line; std::getline(in, line);) {
    const json row = json::parse(line);
    out[row["step"].get<int>()] = row["loss"].get<double>();
  }
  return out;
}

fs::path job(const fs::path& dir, int steps, const std::string& parallel,
             const std::string& checkpoint) {
  const fs::path file = dir / "job.yaml";
  write_text(file,
             "name: resume\nseed: 3\n"
             "model: {vocab_size: 64, seq_len: 16, n_layer: 4, n_head: 4, d_model: 32}\n"
             "data: {type: synthetic}\n"
             "parallel: " +
                 parallel +
                 "\n"
                 "training: {steps: " +
                 std::to_string(steps) +
                 ", micro_batch_size: 2, global_batch_size: 8}\n"
                 "optimizer: {lr: 1.0e-2, warmup_steps: 2, min_lr: 1.0e-3}\n"
                 "checkpoint: " +
                 checkpoint +
                 "\n"
                 "logging: {every_steps: 1}\n"
                 "runtime: {comm_timeout_s: 60, max_restarts: 1}\n");
  return file;
}

ProcResult train(const fs::path& dir, const fs::path& spec, const std::string& run,
                 std::vector<std::string> extra = {},
                 std::vector<std::pair<std::string, std::string>> env = {}) {
  std::vector<std::string> args = {"train", spec.string(), "--set", "run_dir=" + run};
  args.insert(args.end(), extra.begin(), extra.end());
  Proc p(args, dir, env);
  return p.wait(std::chrono::seconds(120));
}

size_t logged_steps(const fs::path& run) {
  if (!fs::exists(run / "metrics.jsonl")) return 0;
  const std::string text = read_text(run / "metrics.jsonl");
  return static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
}

}  // namespace

TEST_CASE("stop and resume reproduces the uninterrupted run bit for bit", "[resume]") {
  TempDir dir("resume-stop");
  const fs::path spec = job(dir.path(), 60, "{dp: 2}", "{every_steps: 7, async: true}");
  const ProcResult straight = train(dir.path(), spec, "straight");
  INFO(straight.out << straight.err);
  REQUIRE(straight.exit_code == 0);

  // Stop with SIGTERM somewhere in the middle: a checkpoint of the step reached is saved.
  Proc p({"train", spec.string(), "--set", "run_dir=cut"}, dir.path());
  REQUIRE(
      eventually([&] { return logged_steps(dir.path() / "cut") >= 12; }, std::chrono::seconds(60)));
  p.signal(SIGTERM);
  const ProcResult stopped = p.wait(std::chrono::seconds(60));
  INFO(stopped.out << stopped.err);
  REQUIRE(stopped.exit_code == 4);
  REQUIRE(fs::exists(dir.path() / "cut" / "checkpoints" / "latest"));
  const size_t reached = logged_steps(dir.path() / "cut");
  REQUIRE(reached < 60);

  const ProcResult resumed = train(dir.path(), spec, "cut");  // --resume auto is the default
  INFO(resumed.out << resumed.err);
  REQUIRE(resumed.exit_code == 0);
  CHECK_THAT(resumed.out, Catch::Contains("resumed from"));
  CHECK(losses_of(dir.path() / "cut") == losses_of(dir.path() / "straight"));
  CHECK(read_text(dir.path() / "cut" / "model.safetensors") ==
        read_text(dir.path() / "straight" / "model.safetensors"));
}

TEST_CASE("a checkpoint resumes onto every other layout", "[resume][layout]") {
  TempDir dir("resume-layouts");
  // Reference: 6 steps on one worker, a checkpoint after step 3.
  const fs::path spec = job(dir.path(), 6, "{dp: 1}", "{every_steps: 3, async: false}");
  REQUIRE(train(dir.path(), spec, "ref").exit_code == 0);
  const auto want = losses_of(dir.path() / "ref");
  const std::string step3 = (dir.path() / "ref" / "checkpoints" / "step_00000003").string();
  struct Case {
    std::string name;
    std::vector<std::string> set;
  };
  const std::vector<Case> cases = {
      {"dp2-zero1", {"--set", "parallel.dp=2", "--set", "parallel.zero=1"}},
      {"tp2", {"--set", "parallel.tp=2"}},
      {"pp2-gpipe", {"--set", "parallel.pp=2", "--set", "parallel.schedule=gpipe"}},
      {"dp2-tp2-pp2-zero2",
       {"--set", "parallel.dp=2", "--set", "parallel.tp=2", "--set", "parallel.pp=2", "--set",
        "parallel.zero=2"}}};
  for (const Case& c : cases) {
    std::vector<std::string> extra = {"--resume", step3};
    extra.insert(extra.end(), c.set.begin(), c.set.end());
    const ProcResult r = train(dir.path(), spec, c.name, extra);
    INFO(c.name << "\n" << r.out << r.err);
    REQUIRE(r.exit_code == 0);
    const auto got = losses_of(dir.path() / c.name);
    REQUIRE(got.size() == 3);  // steps 4-6
    for (const auto& [step, loss] : got) {
      INFO(c.name << " step " << step);
      CHECK(loss == Approx(want.at(step)).epsilon(2e-5));
    }
  }
  // And back: a checkpoint written by 8 ranks (dp 2 x tp 2 x pp 2, ZeRO-2) at step 3
  // resumes on one worker.
  const std::vector<std::string> three_d = {"--set",    "parallel.dp=2", "--set", "parallel.tp=2",
                                            "--set",    "parallel.pp=2", "--set", "parallel.zero=2",
                                            "--resume", "none"};
  REQUIRE(train(dir.path(), spec, "3d", three_d).exit_code == 0);
  const ProcResult back =
      train(dir.path(), spec, "back",
            {"--resume", (dir.path() / "3d" / "checkpoints" / "step_00000003").string()});
  INFO(back.out << back.err);
  REQUIRE(back.exit_code == 0);
  const auto got = losses_of(dir.path() / "back");
  REQUIRE(got.size() == 3);
  for (const auto& [step, loss] : got) CHECK(loss == Approx(want.at(step)).epsilon(2e-5));
}

TEST_CASE("ZeRO-3 checkpoints resume on any layout and ZeRO stage, and back", "[resume][layout]") {
  TempDir dir("resume-zero3");
  const fs::path spec = job(dir.path(), 6, "{dp: 1}", "{every_steps: 3, async: false}");
  REQUIRE(train(dir.path(), spec, "ref").exit_code == 0);
  const auto want = losses_of(dir.path() / "ref");
  // Written by dp 2 x tp 2 with ZeRO-3: each rank held only its shard of the parameters.
  const ProcResult z3 = train(dir.path(), spec, "z3",
                              {"--set", "parallel.dp=2", "--set", "parallel.tp=2", "--set",
                               "parallel.zero=3", "--resume", "none"});
  INFO(z3.out << z3.err);
  REQUIRE(z3.exit_code == 0);
  const auto z3_losses = losses_of(dir.path() / "z3");
  for (const auto& [step, loss] : z3_losses) CHECK(loss == Approx(want.at(step)).epsilon(2e-5));
  struct Case {
    std::string name, from;
    std::vector<std::string> set;
  };
  const std::vector<Case> cases = {
      {"z3-same",
       "z3",
       {"--set", "parallel.dp=2", "--set", "parallel.tp=2", "--set", "parallel.zero=3"}},
      {"z3-to-one", "z3", {}},
      {"z3-to-pp2-zero1",
       "z3",
       {"--set", "parallel.dp=2", "--set", "parallel.pp=2", "--set", "parallel.zero=1"}},
      {"one-to-dp4-zero3", "ref", {"--set", "parallel.dp=4", "--set", "parallel.zero=3"}},
      {"one-to-pp2-zero3",
       "ref",
       {"--set", "parallel.dp=2", "--set", "parallel.pp=2", "--set", "parallel.schedule=1f1b",
        "--set", "parallel.zero=3"}}};
  for (const Case& c : cases) {
    std::vector<std::string> extra = {
        "--resume", (dir.path() / c.from / "checkpoints" / "step_00000003").string()};
    extra.insert(extra.end(), c.set.begin(), c.set.end());
    const ProcResult r = train(dir.path(), spec, c.name, extra);
    INFO(c.name << "\n" << r.out << r.err);
    REQUIRE(r.exit_code == 0);
    const auto got = losses_of(dir.path() / c.name);
    REQUIRE(got.size() == 3);  // steps 4-6
    for (const auto& [step, loss] : got) {
      INFO(c.name << " step " << step);
      CHECK(loss == Approx(want.at(step)).epsilon(2e-5));
      // The same layout continues the run it stopped bit for bit.
      if (c.name == "z3-same") CHECK(loss == z3_losses.at(step));
    }
  }
  CHECK(read_text(dir.path() / "z3-same" / "model.safetensors") ==
        read_text(dir.path() / "z3" / "model.safetensors"));
}

TEST_CASE("a resume with another global batch continues the data where it stopped", "[resume]") {
  TempDir dir("resume-batch");
  // 4 steps of 8 samples, then 2 more steps of 16 (dp 2 x micro-batch 2 x accumulation 4).
  const fs::path spec = job(dir.path(), 4, "{dp: 1}", "{every_steps: 4, async: false}");
  REQUIRE(train(dir.path(), spec, "first").exit_code == 0);
  const std::string step4 = (dir.path() / "first" / "checkpoints" / "step_00000004").string();
  const ProcResult r =
      train(dir.path(), spec, "bigger",
            {"--resume", step4, "--set", "training.steps=6", "--set", "parallel.dp=2", "--set",
             "training.global_batch_size=16", "--set", "checkpoint.every_steps=2"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out + r.err, Catch::Contains("global batch changed from 8 to 16 samples: the data "
                                            "continues from sample 32"));
  const json meta = json::parse(
      read_text(dir.path() / "bigger" / "checkpoints" / "step_00000006" / "metadata.json"));
  // 4 x 8 drawn before, 2 x 16 after: nothing skipped or drawn twice.
  CHECK(meta["data"]["samples_consumed"].get<int64_t>() == 64);
  CHECK(losses_of(dir.path() / "bigger").size() == 2);
}

TEST_CASE("a worker killed with SIGKILL is restarted from the latest checkpoint", "[resume]") {
  TempDir dir("resume-kill");
  const fs::path spec = job(dir.path(), 40, "{dp: 2}", "{every_steps: 3, async: true}");
  REQUIRE(train(dir.path(), spec, "straight").exit_code == 0);

  std::mt19937 gen(std::random_device{}());
  const size_t kill_after = 4 + gen() % 20;
  Proc p({"train", spec.string(), "--set", "run_dir=killed"}, dir.path());
  REQUIRE(eventually([&] { return logged_steps(dir.path() / "killed") >= kill_after; },
                     std::chrono::seconds(60)));
  const auto workers = processes_mentioning((dir.path() / "killed").string());
  REQUIRE(!workers.empty());
  ::kill(workers.back(), SIGKILL);
  const ProcResult r = p.wait(std::chrono::seconds(120));
  INFO("killed after step " << kill_after << "\n" << r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out + r.err, Catch::Contains("restarting all workers"));
  CHECK(read_text(dir.path() / "killed" / "model.safetensors") ==
        read_text(dir.path() / "straight" / "model.safetensors"));
  CHECK(losses_of(dir.path() / "killed") == losses_of(dir.path() / "straight"));
}

TEST_CASE("a crash while a checkpoint is written leaves the previous one usable", "[resume]") {
  TempDir dir("resume-crash");
  const fs::path spec = job(dir.path(), 12, "{dp: 2}", "{every_steps: 4, async: false}");
  REQUIRE(train(dir.path(), spec, "straight").exit_code == 0);
  // The last rank dies inside the save of step 8 (no restarts: the job fails).
  const ProcResult crashed = train(dir.path(), spec, "crash", {"--set", "runtime.max_restarts=0"},
                                   {{"TRAINCTL_TEST_CRASH_IN_CHECKPOINT", "8"}});
  INFO(crashed.out << crashed.err);
  REQUIRE(crashed.exit_code == 3);
  const fs::path ckpts = dir.path() / "crash" / "checkpoints";
  CHECK(read_text(ckpts / "latest").find("step_00000004") != std::string::npos);
  CHECK_FALSE(fs::exists(ckpts / "step_00000008"));
  const ProcResult verify =
      run_trainctl({"ckpt", "verify", (ckpts / "step_00000004").string()}, dir.path());
  INFO(verify.out << verify.err);
  CHECK(verify.exit_code == 0);
  // Resuming continues from step 4 and ends where the uninterrupted run ended.
  const ProcResult resumed = train(dir.path(), spec, "crash");
  INFO(resumed.out << resumed.err);
  REQUIRE(resumed.exit_code == 0);
  CHECK_THAT(resumed.out, Catch::Contains("step 4"));
  CHECK(read_text(dir.path() / "crash" / "model.safetensors") ==
        read_text(dir.path() / "straight" / "model.safetensors"));
}

TEST_CASE("resume auto skips a damaged newest checkpoint and says so", "[resume]") {
  TempDir dir("resume-damaged");
  const fs::path spec = job(dir.path(), 8, "{dp: 2}", "{every_steps: 4, async: false}");
  REQUIRE(train(dir.path(), spec, "straight").exit_code == 0);
  const fs::path ckpts = dir.path() / "straight" / "checkpoints";
  // Flip one byte in the middle of a shard of the newest checkpoint (step 8).
  const fs::path shard = ckpts / "step_00000008" / "rank_00000.safetensors";
  std::string bytes = read_text(shard);
  bytes[bytes.size() / 2] ^= 0x20;
  write_text(shard, bytes);
  const ProcResult verify =
      run_trainctl({"ckpt", "verify", (ckpts / "step_00000008").string()}, dir.path());
  CHECK(verify.exit_code != 0);
  CHECK_THAT(verify.out + verify.err, Catch::Contains("rank_00000.safetensors"));
  // An explicit path to the damaged checkpoint is an error naming the file.
  const ProcResult explicit_damaged =
      train(dir.path(), spec, "other", {"--resume", (ckpts / "step_00000008").string()});
  CHECK(explicit_damaged.exit_code == 2);  // bad input: not restarted
  CHECK_THAT(read_text(dir.path() / "other" / "logs" / "rank0.log"),
             Catch::Contains("checksum mismatch"));

  // Auto resume falls back to step 4 and retrains steps 5-8 to the same result.
  const std::string before = read_text(dir.path() / "straight" / "model.safetensors");
  const ProcResult r = train(dir.path(), spec, "straight", {"--set", "training.steps=8"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("is damaged"));
  CHECK_THAT(r.out, Catch::Contains("step_00000004"));
  CHECK(read_text(dir.path() / "straight" / "model.safetensors") == before);
}

TEST_CASE("time-based checkpoints and keep_last", "[resume]") {
  TempDir dir("resume-policy");
  // Checkpoints every 0.2 s of a run of ~2 s, keeping the newest 2: several saves happen,
  // only two complete checkpoints remain, and `latest` names the final one.
  const fs::path spec =
      job(dir.path(), 400, "{dp: 2}", "{every_minutes: 0.003, keep_last: 2, async: true}");
  const ProcResult r = train(dir.path(), spec, "timed");
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const size_t saves = [&] {
    size_t n = 0;
    for (size_t at = r.out.find("checkpoint: step"); at != std::string::npos;
         at = r.out.find("checkpoint: step", at + 1)) {
      ++n;
    }
    return n;
  }();
  CHECK(saves >= 3);  // at least two time-based ones and the final one
  const fs::path ckpts = dir.path() / "timed" / "checkpoints";
  std::vector<std::string> complete;
  for (const auto& entry : fs::directory_iterator(ckpts)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("step_", 0) == 0) complete.push_back(name);
  }
  CHECK(complete.size() == 2);
  CHECK(read_text(ckpts / "latest").find("step_00000400") != std::string::npos);
}

TEST_CASE("a zbv checkpoint resumes on other layouts, and one resumes on zbv",
          "[resume][layout][zbv]") {
  // zbv's ranks hold non-contiguous blocks (rank 0: 0 and 3 with the embedding and the
  // head); parameter names are global, so its checkpoints are any layout's.
  TempDir dir("resume-zbv");
  const fs::path spec = job(dir.path(), 6, "{dp: 1}", "{every_steps: 3, async: false}");
  REQUIRE(train(dir.path(), spec, "ref").exit_code == 0);
  const auto want = losses_of(dir.path() / "ref");
  const std::vector<std::string> zbv = {"--set", "parallel.pp=2",
                                        "--set", "parallel.schedule=zbv",
                                        "--set", "parallel.virtual_stages=2"};
  auto check_steps_4_to_6 = [&](const std::string& name, std::vector<std::string> extra) {
    const ProcResult r = train(dir.path(), spec, name, extra);
    INFO(name << "\n" << r.out << r.err);
    REQUIRE(r.exit_code == 0);
    const auto got = losses_of(dir.path() / name);
    REQUIRE(got.size() == 3);
    for (const auto& [step, loss] : got) {
      INFO(name << " step " << step);
      CHECK(loss == Approx(want.at(step)).epsilon(2e-5));
    }
  };
  // One worker's checkpoint onto zbv with dp 2 and ZeRO-1.
  std::vector<std::string> onto = zbv;
  for (const std::string s : {"--set", "parallel.dp=2", "--set", "parallel.zero=1", "--resume"})
    onto.push_back(s);
  onto.push_back((dir.path() / "ref" / "checkpoints" / "step_00000003").string());
  check_steps_4_to_6("onto-zbv", onto);
  // zbv's checkpoint back onto one worker and onto 1F1B at pp 2.
  std::vector<std::string> written = zbv;
  written.insert(written.end(), {"--resume", "none"});
  REQUIRE(train(dir.path(), spec, "zbv", written).exit_code == 0);
  const std::string step3 = (dir.path() / "zbv" / "checkpoints" / "step_00000003").string();
  check_steps_4_to_6("back", {"--resume", step3});
  check_steps_4_to_6("to-1f1b", {"--resume", step3, "--set", "parallel.pp=2"});
  // Interleaved with the same pp and virtual_stages places the chunks otherwise (rank 0:
  // blocks 0 and 2): the names, not the ranks' files, carry the parameters over.
  check_steps_4_to_6("to-interleaved",
                     {"--resume", step3, "--set", "parallel.pp=2", "--set",
                      "parallel.schedule=interleaved", "--set", "parallel.virtual_stages=2"});
}
