// `trainctl sample` and `trainctl eval` on a run trained from a `data prepare` directory:
// BPE prompts and text through the tokenizer copied there, bits per byte over its bytes.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "integration/helpers.h"
#include "unit/tiny_tokenizer.h"

using namespace trainctl::test;

namespace {}  // namespace

TEST_CASE("sample and eval use the tokenizer of a run's prepared data",
          "[sample][eval][integration]") {
  TempDir dir("samplebpe");
  const fs::path tok = write_tiny_tokenizer(dir.path());
  std::string text;
  for (int i = 0; i < 60; ++i) text += "the theme of the thing is this, then that.\n";
  write_text(dir / "corpus.txt", text);
  ProcResult prep = run_trainctl(
      {"data", "prepare", "--tokenizer", tok.string(), "--input", (dir / "corpus.txt").string(),
       "--out", (dir / "data").string(), "--val-fraction", "0.3"},
      dir.path());
  INFO(prep.out << prep.err);
  REQUIRE(prep.exit_code == 0);
  const fs::path spec = dir / "job.yaml";
  write_text(spec,
             "name: bpe\nseed: 5\n"
             "model: {vocab_size: 258, seq_len: 16, n_layer: 1, n_head: 2, d_model: 16}\n"
             "data: {type: tokens, path: " +
                 (dir / "data").string() +
                 "}\n"
                 "training: {steps: 3, micro_batch_size: 2, global_batch_size: 2, eval_batches: "
                 "2}\nruntime: {comm_timeout_s: 60}\n");
  const fs::path run = dir / "run";
  ProcResult t =
      run_trainctl({"train", spec.string(), "--set", "run_dir=" + run.string()}, dir.path());
  INFO(t.out << t.err);
  REQUIRE(t.exit_code == 0);

  ProcResult s = run_trainctl(
      {"sample", run.string(), "--prompt", "the", "--max-new-tokens", "10", "--seed", "3"},
      dir.path());
  INFO(s.out << s.err);
  REQUIRE(s.exit_code == 0);
  CHECK(s.out.rfind("the", 0) == 0);
  CHECK_THAT(s.err, Catch::Contains("BPE tokens"));
  // An empty prompt starts from <|endoftext|>.
  ProcResult e =
      run_trainctl({"sample", run.string(), "--prompt", "", "--max-new-tokens", "5"}, dir.path());
  INFO(e.err);
  CHECK(e.exit_code == 0);

  ProcResult ev = run_trainctl(
      {"eval", spec.string(), "--set", "run_dir=" + run.string(), "--from", run.string()},
      dir.path());
  INFO(ev.out << ev.err);
  REQUIRE(ev.exit_code == 0);
  std::smatch m;
  const std::regex re("val_loss ([0-9.]+), bits per byte ([0-9.]+) \\((\\d+) tokens, (\\d+) bytes");
  REQUIRE(std::regex_search(ev.out, m, re));
  const double loss = std::stod(m[1]), bpb = std::stod(m[2]);
  const double tokens = std::stod(m[3]), bytes = std::stod(m[4]);
  CHECK(tokens == 2 * 2 * 16);
  CHECK(bytes > tokens);  // "th" is one token of two bytes
  CHECK(bytes < 2 * tokens);
  CHECK(std::abs(bpb - loss * tokens / (bytes * std::log(2.0))) < 1e-5);
}
