// The closing "done:" line of `trainctl train`: after a resume, tokens/s counts only the
// steps this launch trained over this launch's time (it divided every step of the run by
// the resumed launch's time: 3x too high for a run resumed at step 40 of 60).
#include <catch2/catch.hpp>

#include <regex>

#include "integration/helpers.h"

using namespace trainctl::test;

namespace {

struct Summary {
  double seconds = 0, tokens_per_s = 0;
};

// "done: ... in S s | ... | T tokens/s" of `out`, with `head` before " in".
Summary summary_of(const std::string& out, const std::string& head) {
  const std::regex line("done: " + head + " in ([0-9.]+) s \\|[^\\n]*\\| ([0-9]+) tokens/s");
  std::smatch m;
  REQUIRE(std::regex_search(out, m, line));
  return {std::stod(m[1]), std::stod(m[2])};
}

// tokens/s x seconds is `tokens`, up to the rounding of the printed seconds (0.05 s).
void check_rate(const Summary& s, double tokens) {
  INFO("seconds " << s.seconds << ", tokens/s " << s.tokens_per_s << ", tokens " << tokens);
  REQUIRE(s.seconds >= 0.1);
  CHECK(s.tokens_per_s * (s.seconds - 0.05) <= tokens * 1.02);
  CHECK(s.tokens_per_s * (s.seconds + 0.05) >= tokens * 0.98);
}

}  // namespace

TEST_CASE("the final summary's tokens/s after a resume counts this launch's steps only",
          "[train][resume][integration]") {
  TempDir dir("summary");
  const fs::path spec = write_small_job(dir.path(), SmallJob{});
  // 512 tokens per step (global batch 8 x seq_len 64); steps slow enough to time.
  const std::vector<std::string> sets = {"--set", "model.d_model=128",
                                         "--set", "model.seq_len=64",
                                         "--set", "checkpoint.every_steps=20"};
  auto train = [&](int steps) {
    std::vector<std::string> args = {"train", spec.string(), "--set",
                                     "training.steps=" + std::to_string(steps)};
    args.insert(args.end(), sets.begin(), sets.end());
    ProcResult r = run_trainctl(args, dir.path(), std::chrono::seconds(120));
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    return r.out;
  };
  const std::string first = train(40);
  check_rate(summary_of(first, "40 steps"), 40.0 * 512);
  const std::string resumed = train(60);
  CHECK_THAT(resumed, Catch::Contains("resumed from"));
  check_rate(summary_of(resumed, "step 60 \\(20 steps from step 40\\)"), 20.0 * 512);
}
