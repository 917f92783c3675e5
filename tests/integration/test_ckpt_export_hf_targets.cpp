// `trainctl ckpt export --format hf`: the tokenizer goes out as tokenizer.json (whatever
// its name was) with a tokenizer_config.json that names the fast tokenizer, so
// AutoTokenizer finds it (tests/hf/check_hf_export.sh loads it with transformers); the
// folder may not be the run directory or inside it (but its hf/), and one that holds files
// is refused unless --force.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "integration/helpers.h"
#include "unit/tiny_tokenizer.h"

using namespace trainctl::test;

namespace {

// A 2-step run trained from data prepared with a tokenizer file named bpe.json.
fs::path trained_run(const TempDir& dir) {
  fs::create_directories(dir / "tok");
  fs::rename(write_tiny_tokenizer(dir / "tok"), dir / "bpe.json");
  std::string text;
  for (int i = 0; i < 40; ++i) text += "the theme of the thing is this, then that.\n";
  write_text(dir / "corpus.txt", text);
  ProcResult prep = run_trainctl(
      {"data", "prepare", "--tokenizer", (dir / "bpe.json").string(), "--input",
       (dir / "corpus.txt").string(), "--out", (dir / "data").string(), "--val-fraction", "0.3"},
      dir.path());
  INFO(prep.out << prep.err);
  REQUIRE(prep.exit_code == 0);
  write_text(dir / "job.yaml",
             "name: hfout\nseed: 5\n"
             "model: {vocab_size: 258, seq_len: 16, n_layer: 1, n_head: 2, d_model: 16}\n"
             "data: {type: tokens, path: " +
                 (dir / "data").string() +
                 "}\ntraining: {steps: 2, micro_batch_size: 2, global_batch_size: 2}\n"
                 "runtime: {comm_timeout_s: 60}\n");
  const fs::path run = dir / "run";
  ProcResult t = run_trainctl(
      {"train", (dir / "job.yaml").string(), "--set", "run_dir=" + run.string()}, dir.path());
  INFO(t.out << t.err);
  REQUIRE(t.exit_code == 0);
  return run;
}

ProcResult export_hf(const fs::path& run, const fs::path& cwd, std::vector<std::string> more) {
  std::vector<std::string> args = {"ckpt", "export", run.string(), "--format", "hf"};
  args.insert(args.end(), more.begin(), more.end());
  return run_trainctl(args, cwd);
}

}  // namespace

TEST_CASE(
    "ckpt export --format hf: tokenizer.json for AutoTokenizer, no write into the run, "
    "a non-empty folder only with --force",
    "[ckpt][integration]") {
  TempDir dir("hfout");
  const fs::path run = trained_run(dir);
  const std::string model_before = read_text(run / "model.safetensors");
  const fs::path hf = dir / "hf";

  ProcResult ok = export_hf(run, dir.path(), {"--out", hf.string()});
  INFO(ok.out << ok.err);
  REQUIRE(ok.exit_code == 0);
  CHECK(fs::exists(hf / "tokenizer.json"));
  CHECK_FALSE(fs::exists(hf / "bpe.json"));
  const auto config = nlohmann::json::parse(read_text(hf / "tokenizer_config.json"));
  CHECK(config.at("tokenizer_class") == "PreTrainedTokenizerFast");
  CHECK(nlohmann::json::parse(read_text(hf / "tokenizer.json")).at("model").at("type") == "BPE");

  // The run directory itself, or a folder inside it other than hf/: refused, nothing written.
  for (const fs::path& inside : {run, run / "logs/hf", run / "checkpoints/hf"}) {
    ProcResult r = export_hf(run, dir.path(), {"--out", inside.string()});
    INFO(inside << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("--out " + inside.string()));
  }
  CHECK(read_text(run / "model.safetensors") == model_before);
  CHECK_FALSE(fs::exists(run / "config.json"));
  CHECK_FALSE(fs::exists(run / "logs/hf"));

  // A folder that holds files: refused (named) unless --force.
  write_text(hf / "vocab.json", "{}");  // an earlier export's GPT-2 tokenizer
  write_text(hf / "merges.txt", "#version: 0.2\n");
  ProcResult again = export_hf(run, dir.path(), {"--out", hf.string()});
  CHECK(again.exit_code == 2);
  CHECK_THAT(again.err,
             Catch::Contains(hf.string() + " is not empty") && Catch::Contains("--force"));
  ProcResult forced = export_hf(run, dir.path(), {"--out", hf.string(), "--force"});
  INFO(forced.err);
  CHECK(forced.exit_code == 0);
  CHECK(fs::exists(hf / "tokenizer.json"));
  CHECK_FALSE(fs::exists(hf / "vocab.json"));  // stale: AutoTokenizer must not mix them
  CHECK_FALSE(fs::exists(hf / "merges.txt"));

  // The default folder, the run's hf/, is the export's own.
  ProcResult def = export_hf(run, dir.path(), {});
  INFO(def.err);
  CHECK(def.exit_code == 0);
  CHECK(fs::exists(run / "hf/model.safetensors"));
  CHECK(read_text(run / "model.safetensors") == model_before);

  // --force belongs to --format hf.
  ProcResult nano = run_trainctl(
      {"ckpt", "export", run.string(), "--out", (dir / "m.safetensors").string(), "--force"},
      dir.path());
  CHECK(nano.exit_code == 2);
}

TEST_CASE(
    "ckpt export --format hf writes explicit null special ids without a tokenizer and "
    "floats as people write them",
    "[ckpt][integration]") {
  TempDir dir("hfcfg");
  write_text(dir / "job.yaml",
             "name: hfcfg\nmodel: {type: llama, vocab_size: 64, seq_len: 8, n_layer: 1, n_head: 2, "
             "d_model: 16}\ndata: {type: synthetic}\n"
             "training: {steps: 1, micro_batch_size: 1, global_batch_size: 1}\n");
  const fs::path run = dir / "runs/hfcfg";
  REQUIRE(run_trainctl({"train", (dir / "job.yaml").string()}, dir.path()).exit_code == 0);
  ProcResult r = export_hf(run, dir.path(), {"--out", (dir / "hf").string()});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const std::string text = read_text(dir / "hf/config.json");
  const auto config = nlohmann::json::parse(text);
  // Synthetic data has no tokenizer: null, never transformers' Llama defaults (1 and 2).
  CHECK(config.at("bos_token_id").is_null());
  CHECK(config.at("eos_token_id").is_null());
  CHECK_THAT(text, Catch::Contains("\"rms_norm_eps\": 1e-05,"));
}

TEST_CASE("checkpoint.export_hf replaces the run's own hf/ when a run is resumed",
          "[ckpt][integration]") {
  TempDir dir("hfagain");
  write_text(dir / "job.yaml",
             "name: hfagain\nmodel: {vocab_size: 64, seq_len: 8, n_layer: 1, n_head: 2, "
             "d_model: 16}\ndata: {type: synthetic}\ncheckpoint: {export_hf: true}\n"
             "training: {steps: 2, micro_batch_size: 1, global_batch_size: 1}\n");
  const fs::path hf = dir / "runs/hfagain/hf/model.safetensors";
  REQUIRE(run_trainctl({"train", (dir / "job.yaml").string()}, dir.path()).exit_code == 0);
  const std::string first = read_text(hf);
  const ProcResult more =
      run_trainctl({"train", (dir / "job.yaml").string(), "--set", "training.steps=4"}, dir.path());
  INFO(more.out << more.err);
  CHECK(more.exit_code == 0);
  CHECK(read_text(hf) != first);  // the step-4 model, not the step-2 one
}
