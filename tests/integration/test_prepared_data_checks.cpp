// Issue 36 at the command line: tokenizer files that would allocate from an id or drop text,
// and a prepared directory whose tokenizer was replaced after training, exit 2 with the
// file and the problem (sample and eval no longer use another tokenizer than the data's).
#include <catch2/catch.hpp>

#include <fstream>
#include <nlohmann/json.hpp>

#include "integration/helpers.h"
#include "unit/tiny_tokenizer.h"

using namespace trainctl::test;

TEST_CASE("data encode refuses a tokenizer with a stray id or a missing byte (exit 2)",
          "[data][integration]") {
  TempDir dir("tokchecks");
  const fs::path tok = write_tiny_tokenizer(dir.path());
  write_text(dir / "in.txt", "the cat in the hat\n");
  nlohmann::json doc = nlohmann::json::parse(std::ifstream(tok));
  auto encode_with = [&](const nlohmann::json& d) {
    write_text(dir / "bad.json", d.dump());
    return run_trainctl({"data", "encode", "--tokenizer", (dir / "bad.json").string(), "--input",
                         (dir / "in.txt").string(), "--out", (dir / "out.ids").string()},
                        dir.path());
  };
  nlohmann::json huge = doc;
  huge["model"]["vocab"]["zz"] = 2000000000;
  ProcResult h = encode_with(huge);
  CHECK(h.exit_code == 2);
  CHECK_THAT(h.err, Catch::Contains("bad.json: token 'zz' has id 2000000000; ids must lie in"));
  nlohmann::json no_a = doc;
  no_a["model"]["vocab"].erase("a");
  ProcResult a = encode_with(no_a);
  CHECK(a.exit_code == 2);
  CHECK_THAT(a.err, Catch::Contains("no token for 1 of the 256 bytes: 'a' (byte 0x61)"));
  CHECK_FALSE(fs::exists(dir / "out.ids"));
}

TEST_CASE("sample and eval refuse a prepared directory whose tokenizer was replaced",
          "[sample][eval][integration]") {
  TempDir dir("tokswap");
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
             "name: swap\nseed: 5\n"
             "model: {vocab_size: 260, seq_len: 16, n_layer: 1, n_head: 2, d_model: 16}\n"
             "data: {type: tokens, path: " +
                 (dir / "data").string() +
                 "}\ntraining: {steps: 2, micro_batch_size: 2, global_batch_size: 2, "
                 "eval_batches: 2}\nruntime: {comm_timeout_s: 60}\n");
  const fs::path run = dir / "run";
  ProcResult t =
      run_trainctl({"train", spec.string(), "--set", "run_dir=" + run.string()}, dir.path());
  INFO(t.out << t.err);
  REQUIRE(t.exit_code == 0);

  // Another tokenizer in the copy's place: one more merge, other ids for the same text.
  nlohmann::json doc = nlohmann::json::parse(std::ifstream(dir / "data" / "tokenizer.json"));
  doc["model"]["vocab"]["he"] = 258;
  doc["added_tokens"][0]["id"] = 259;
  doc["model"]["merges"].push_back("h e");
  write_text(dir / "data" / "tokenizer.json", doc.dump());

  ProcResult s = run_trainctl({"sample", run.string(), "--prompt", "the", "--max-new-tokens", "4"},
                              dir.path());
  CHECK(s.exit_code == 2);
  CHECK_THAT(s.err, Catch::Contains("(tokenizer.hash) records fnv1a64:"));
  ProcResult ev = run_trainctl(
      {"eval", spec.string(), "--set", "run_dir=" + run.string(), "--from", run.string()},
      dir.path());
  CHECK(ev.exit_code == 2);
  CHECK_THAT(ev.err, Catch::Contains("data.path: " + (dir / "data" / "tokenizer.json").string() +
                                     ": the tokenizer's files hash to"));
}
