// Resuming a checkpoint of another model (or without the job's optimizer state) is refused
// by the launcher, before any worker starts (issue 37, item 4), with --resume auto and with
// --resume PATH; another layout is not refused (checkpoints load into any dp/tp/pp). And `trainctl
// eval RUN_DIR|CKPT` reads the run's config.resolved.yaml (item 6).
#include <catch2/catch.hpp>

#include "integration/helpers.h"

using namespace trainctl::test;

namespace {

ProcResult trainctl_in(const fs::path& dir, std::vector<std::string> args) {
  Proc p(std::move(args), dir);
  return p.wait(std::chrono::seconds(120));
}

}  // namespace

TEST_CASE("resume of another model is refused before any worker starts", "[resume]") {
  TempDir dir("resume-model");
  const fs::path job = write_small_job(dir.path(), {.name = "resume-model"});
  const std::string run = (dir.path() / "run").string();
  const ProcResult base =
      trainctl_in(dir.path(), {"train", job.string(), "--set", "run_dir=" + run});
  INFO(base.out << base.err);
  REQUIRE(base.exit_code == 0);
  const std::string metrics = read_text(fs::path(run) / "metrics.jsonl");
  const std::string step8 = run + "/checkpoints/step_00000008";

  for (const std::vector<std::string>& resume :
       {std::vector<std::string>{}, std::vector<std::string>{"--resume", step8}}) {
    std::vector<std::string> args = {"train", job.string(),       "--set", "run_dir=" + run,
                                     "--set", "model.d_model=64", "--set", "training.steps=12"};
    args.insert(args.end(), resume.begin(), resume.end());
    const ProcResult r = trainctl_in(dir.path(), args);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains(step8 +
                                      "/metadata.json: the checkpoint holds another model "
                                      "(gpt, vocab_size 64, seq_len 16, n_layer 2, n_head "
                                      "4, d_model 32) than " +
                                      job.string() +
                                      " (gpt, vocab_size 64, seq_len 16, n_layer "
                                      "2, n_head 4, d_model 64)"));
    CHECK_THAT(r.out + r.err, !Catch::Contains("started 1 worker"));  // none was launched
    CHECK(read_text(fs::path(run) / "metrics.jsonl") == metrics);
  }

  // Another optimizer.type: its state is not in the checkpoint, refused the same way.
  const ProcResult sgd =
      trainctl_in(dir.path(), {"train", job.string(), "--set", "run_dir=" + run, "--set",
                               "optimizer.type=sgd", "--set", "training.steps=12"});
  INFO(sgd.out << sgd.err);
  CHECK(sgd.exit_code == 2);
  CHECK_THAT(sgd.err, Catch::Contains(step8 + "/metadata.json: the checkpoint has no sgd state "
                                              "(momentum_buffer)"));
  CHECK_THAT(sgd.out + sgd.err, !Catch::Contains("started 1 worker"));

  // Another layout of the same model resumes.
  const ProcResult layout =
      trainctl_in(dir.path(), {"train", job.string(), "--set", "run_dir=" + run, "--set",
                               "parallel.dp=2", "--set", "training.steps=10"});
  INFO(layout.out << layout.err);
  CHECK(layout.exit_code == 0);
  CHECK_THAT(layout.out, Catch::Contains("resumed from " + step8));

  SECTION("eval RUN_DIR and eval CKPT use the run's config.resolved.yaml") {
    const ProcResult by_run = trainctl_in(dir.path(), {"eval", run});
    INFO(by_run.out << by_run.err);
    CHECK(by_run.exit_code == 0);
    CHECK_THAT(by_run.out, Catch::Contains("eval step 10: val_loss"));
    const ProcResult by_ckpt = trainctl_in(dir.path(), {"eval", step8, "--set", "parallel.dp=1"});
    INFO(by_ckpt.out << by_ckpt.err);
    CHECK(by_ckpt.exit_code == 0);
    CHECK_THAT(by_ckpt.out, Catch::Contains("eval step 8: val_loss"));
    // The job spec form stays, and needs --from.
    const ProcResult no_from = trainctl_in(dir.path(), {"eval", job.string()});
    CHECK(no_from.exit_code == 2);
    CHECK_THAT(no_from.err, Catch::Contains("--from CKPT is required with a job spec"));
    const ProcResult typo = trainctl_in(dir.path(), {"eval", run + "-typo"});
    CHECK(typo.exit_code == 2);
    CHECK_THAT(typo.err, Catch::Contains("-typo: no such file or directory"));
    const ProcResult nothing = trainctl_in(dir.path(), {"eval", dir.path().string()});
    CHECK(nothing.exit_code == 2);
    CHECK_THAT(nothing.err, Catch::Contains("no config.resolved.yaml here"));
  }
}
