// `trainctl eval`: a checkpoint's validation loss equals the val_loss training logged at
// that step, on the layout that trained it and on another; bits per byte of byte data.
#include <catch2/catch.hpp>

#include <cmath>
#include <nlohmann/json.hpp>
#include <regex>

#include "integration/helpers.h"

using namespace trainctl::test;

namespace {

// The val_loss metrics.jsonl logged at `step`.
double logged_val_loss(const fs::path& run, int step) {
  std::istringstream lines(read_text(run / "metrics.jsonl"));
  std::string line;
  double v = -1;
  while (std::getline(lines, line)) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.value("step", -1) == step && j.contains("val_loss")) v = j["val_loss"];
  }
  return v;
}

struct Eval {
  int64_t step = -1;
  double loss = -1, bpb = -1;
  long long tokens = -1, bytes = -1;
};

Eval parse_eval(const std::string& out) {
  std::smatch m;
  Eval e;
  const std::regex re(
      "eval step (\\d+): val_loss ([0-9.]+), bits per byte ([0-9.]+) \\((\\d+) tokens, (\\d+) "
      "bytes\\)");
  if (std::regex_search(out, m, re)) {
    e.step = std::stoll(m[1]);
    e.loss = std::stod(m[2]);
    e.bpb = std::stod(m[3]);
    e.tokens = std::stoll(m[4]);
    e.bytes = std::stoll(m[5]);
  }
  return e;
}

}  // namespace

TEST_CASE("eval of a checkpoint equals the val_loss training logged, on any layout",
          "[eval][integration]") {
  TempDir dir("eval");
  const fs::path spec = dir / "job.yaml";
  write_text(
      spec,
      "name: evaljob\nseed: 5\n"
      "model: {vocab_size: 256, seq_len: 16, n_layer: 2, n_head: 2, d_model: 16}\n"
      "data: {type: synthetic}\nparallel: {tp: 2}\n"
      "training: {steps: 6, micro_batch_size: 2, global_batch_size: 4, eval_every: 3,"
      " eval_batches: 3}\n"
      "checkpoint: {every_steps: 3}\nlogging: {every_steps: 1}\nruntime: {comm_timeout_s: 60}\n");
  const fs::path run = dir / "run";
  ProcResult t =
      run_trainctl({"train", spec.string(), "--set", "run_dir=" + run.string()}, dir.path());
  INFO(t.out << t.err);
  REQUIRE(t.exit_code == 0);
  const double logged = logged_val_loss(run, 3);
  REQUIRE(logged > 0);

  const std::string step3 = (run / "checkpoints" / "step_00000003").string();
  ProcResult same = run_trainctl(
      {"eval", spec.string(), "--set", "run_dir=" + run.string(), "--from", step3}, dir.path());
  INFO(same.out << same.err);
  REQUIRE(same.exit_code == 0);
  const Eval a = parse_eval(same.out);
  CHECK(a.step == 3);
  CHECK(std::abs(a.loss - logged) < 2e-6);
  CHECK(a.tokens == 3 * 2 * 16);
  CHECK(a.bytes == a.tokens);  // byte-level
  CHECK(std::abs(a.bpb - a.loss / std::log(2.0)) < 1e-5);
  CHECK(fs::exists(run / "eval" / "logs"));  // not the training run's logs

  ProcResult other =
      run_trainctl({"eval", spec.string(), "--set", "run_dir=" + run.string(), "--set",
                    "parallel.tp=1", "--set", "parallel.pp=2", "--from", step3},
                   dir.path());
  INFO(other.out << other.err);
  REQUIRE(other.exit_code == 0);
  CHECK(std::abs(parse_eval(other.out).loss - a.loss) < 2e-5);

  ProcResult missing = run_trainctl({"eval", spec.string(), "--set", "run_dir=" + run.string(),
                                     "--from", (dir / "nothing").string()},
                                    dir.path());
  CHECK(missing.exit_code == 2);
  CHECK_THAT(missing.err, Catch::Contains("nothing"));

  ProcResult other_model = run_trainctl({"eval", spec.string(), "--set", "run_dir=" + run.string(),
                                         "--set", "model.d_model=32", "--from", step3},
                                        dir.path());
  CHECK(other_model.exit_code == 2);
  CHECK_THAT(other_model.err,
             Catch::Contains("step_00000003/metadata.json: the checkpoint holds "
                             "another model (gpt, vocab_size 256, seq_len 16, n_layer 2, n_head 2, "
                             "d_model 16)"));
}
