// `trainctl sample`'s numeric options: NaN, infinite, negative or out-of-range values exit
// 2 naming the option and its range, before anything is sampled (--temperature nan used to
// sample greedily with exit 0; --top-k -1 printed DBL_MAX as the limit; --seed -1 wrapped
// around to 2^64 - 1).
#include <catch2/catch.hpp>

#include "integration/helpers.h"

using namespace trainctl::test;

TEST_CASE("sample refuses NaN, infinite, negative and out-of-range numbers (exit 2)",
          "[sample][integration]") {
  TempDir dir("sample-options");
  write_text(dir / "job.yaml",
             "name: opts\nseed: 5\n"
             "model: {vocab_size: 256, seq_len: 16, n_layer: 1, n_head: 2, d_model: 16}\n"
             "data: {type: synthetic}\n"
             "training: {steps: 2, micro_batch_size: 2, global_batch_size: 2}\n"
             "runtime: {comm_timeout_s: 60}\n");
  const fs::path run = dir / "run";
  ProcResult t = run_trainctl(
      {"train", (dir / "job.yaml").string(), "--set", "run_dir=" + run.string()}, dir.path());
  INFO(t.out << t.err);
  REQUIRE(t.exit_code == 0);

  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{"--temperature", "nan"}, "--temperature nan: give a number from 0 (greedy) to 100"},
      {{"--temperature", "-nan"}, "--temperature"},
      {{"--temperature", "inf"}, "--temperature"},
      {{"--temperature", "-0.5"}, "--temperature"},
      {{"--temperature", "101"}, "--temperature"},
      {{"--top-k", "-1"}, "--top-k: '-1' is not a whole number of 0 or more"},
      {{"--top-k", "nan"}, "--top-k"},
      {{"--top-k", "1e3"}, "--top-k"},
      {{"--top-k", "99999999999"}, "--top-k"},
      {{"--seed", "-1"}, "--seed: '-1' is not a whole number of 0 or more"},
      {{"--seed", "nan"}, "--seed"},
      {{"--max-new-tokens", "-5"}, "--max-new-tokens"},
      {{"--max-new-tokens", "nan"}, "--max-new-tokens"},
      {{"--threads", "0"}, "--threads"},
      {{"--threads", "inf"}, "--threads"},
  };
  for (const auto& [option, message] : bad) {
    std::vector<std::string> args = {"sample", run.string(),       "--prompt",
                                     "ab",     "--max-new-tokens", "3"};
    args.insert(args.end(), option.begin(), option.end());
    ProcResult r = run_trainctl(args, dir.path());
    INFO(option[0] << " " << option[1] << ": " << r.out << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains(message));
    CHECK(r.err.find("17976931348623157") == std::string::npos);  // no DBL_MAX as a limit
    CHECK(r.out.empty());                                         // nothing sampled
  }
  // The edges of each range are fine.
  ProcResult ok = run_trainctl({"sample", run.string(), "--prompt", "ab", "--max-new-tokens", "0",
                                "--temperature", "0", "--top-k", "0", "--seed", "0"},
                               dir.path());
  INFO(ok.err);
  CHECK(ok.exit_code == 0);
}
