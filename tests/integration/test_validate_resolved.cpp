// `trainctl validate --show-resolved` prints the merged spec (issue 37, item 3): includes
// merged, variables expanded, defaults filled in, paths absolute; and the hidden `man` and
// the visible `completion` commands run from the real command line.
#include <catch2/catch.hpp>

#include "config/load.h"
#include "integration/helpers.h"

using namespace trainctl::test;

TEST_CASE("validate --show-resolved prints the merged spec, which reads back the same",
          "[cli][spec]") {
  TempDir dir("resolved");
  fs::create_directories(dir.path() / "shared");
  write_text(dir.path() / "shared" / "base.yaml",
             "name: base\nmodel: {vocab_size: 256, seq_len: 16, n_layer: 3, n_head: 2, "
             "d_model: 16}\ntraining: {steps: 5, micro_batch_size: 2}\nrun_dir: runs/base\n");
  const fs::path job = dir.path() / "job.yaml";
  write_text(job, "include: shared/base.yaml\nname: job\noptimizer: {lr: 0.002}\n");
  const ProcResult r = run_trainctl(
      {"validate", job.string(), "--show-resolved", "--set", "training.steps=7"}, dir.path());
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("n_layer: 3"));  // from the included file
  CHECK_THAT(r.out, Catch::Contains("steps: 7"));    // --set on top
  CHECK_THAT(r.out, Catch::Contains("run_dir: \"" + (dir.path() / "shared/runs/base").string()));
  CHECK_THAT(r.out, !Catch::Contains("include"));
  const auto direct = trainctl::config::load_job_spec(job, {"training.steps=7"});
  CHECK(trainctl::config::parse_job_spec(r.out, "resolved", dir.path()) == direct);

  // A bad value in the included file: exit 2, pointing into that file.
  write_text(dir.path() / "shared" / "base.yaml", "name: base\nmodel: {n_layer: 0}\n");
  const ProcResult bad = run_trainctl({"validate", job.string(), "--show-resolved"}, dir.path());
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Catch::Contains("shared/base.yaml:2:18: model.n_layer: must be between 1"));
}

TEST_CASE("completion and man are generated from the command line itself", "[cli]") {
  TempDir dir("completion");
  const ProcResult bash = run_trainctl({"completion", "bash"}, dir.path());
  CHECK(bash.exit_code == 0);
  CHECK_THAT(bash.out, Catch::Contains("complete -o default -F _trainctl trainctl"));
  CHECK_THAT(bash.out, Catch::Contains("\"trainctl validate\") subs=\"\"; opts=\"--help -h --set"));
  CHECK_THAT(bash.out, Catch::Contains("--show-resolved"));
  CHECK_THAT(bash.out, !Catch::Contains("worker"));
  const ProcResult bad = run_trainctl({"completion", "fish"}, dir.path());
  CHECK(bad.exit_code == 2);
  const ProcResult man = run_trainctl({"man"}, dir.path());
  CHECK(man.exit_code == 0);
  CHECK_THAT(man.out, Catch::StartsWith(".TH TRAINCTL 1"));
  CHECK_THAT(man.out, Catch::Contains(".SS \"trainctl eval\""));
  const ProcResult help = run_trainctl({"--help"}, dir.path());
  CHECK_THAT(help.out, Catch::Contains("completion"));
  CHECK_THAT(help.out, !Catch::Contains("\n  man "));  // hidden
}
