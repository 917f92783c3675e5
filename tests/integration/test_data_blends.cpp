// Data through the real binary: a resume just before, at and just after an epoch boundary on
// another layout trains on exactly the uninterrupted run's batches (token ids compared via
// the batch log, TRAINCTL_TEST_BATCH_LOG); a blend of two sources reports val_loss/<name>,
// records each source's position (checkpoint metadata, run_dir/data_sources.json) and resumes
// on another layout with the same batches; bad blends are refused before launch; a
// vocabulary beyond 65536 ids is prepared as uint32 tokens, trained on, sampled and evaluated.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "integration/helpers.h"
#include "unit/large_tokenizer.h"
#include "unit/tiny_tokenizer.h"

using namespace trainctl::test;
using nlohmann::json;

namespace {

const std::vector<std::pair<std::string, std::string>> kBatchLog = {
    {"TRAINCTL_TEST_BATCH_LOG", "1"}};

// (step, global sample index) -> hash of its token ids, over every rank's batch log.
std::map<std::pair<int, int64_t>, std::string> batches_of(const fs::path& run) {
  std::map<std::pair<int, int64_t>, std::string> out;
  for (const auto& f : fs::directory_iterator(run / "batches")) {
    std::istringstream in(read_text(f.path()));
    for (std::string line; std::getline(in, line);) {
      const json row = json::parse(line);
      for (const json& s : row["samples"]) {
        const auto key = std::make_pair(row["step"].get<int>(), s[0].get<int64_t>());
        const std::string hash = s[1].get<std::string>();
        // Ranks of one replica, or a step run twice, must agree.
        const auto [it, fresh] = out.emplace(key, hash);
        REQUIRE(it->second == hash);
      }
    }
  }
  return out;
}

ProcResult train(const fs::path& dir, const fs::path& spec, const std::string& run,
                 std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"train", spec.string(), "--set", "run_dir=" + run};
  args.insert(args.end(), extra.begin(), extra.end());
  Proc p(args, dir, kBatchLog);
  return p.wait(std::chrono::seconds(180));
}

std::string step_dir(const fs::path& run, int step) {
  char name[32];
  std::snprintf(name, sizeof name, "step_%08d", step);
  return (run / "checkpoints" / name).string();
}

// The batches of `resumed` (steps after `from`) are the uninterrupted run's.
void check_same_batches(const fs::path& straight, const fs::path& resumed, int from, int steps) {
  const auto want = batches_of(straight);
  const auto got = batches_of(resumed);
  std::set<int> steps_seen;
  for (const auto& [key, hash] : got) {
    INFO("step " << key.first << " sample " << key.second);
    REQUIRE(key.first > from);
    REQUIRE(want.count(key) == 1);
    CHECK(want.at(key) == hash);
    steps_seen.insert(key.first);
  }
  CHECK(steps_seen.size() == static_cast<size_t>(steps - from));
  size_t expected = 0;
  for (const auto& [key, hash] : want) expected += key.first > from;
  CHECK(got.size() == expected);
}

}  // namespace

TEST_CASE("a resume before, at and after an epoch boundary gets the uninterrupted batches",
          "[epochs][resume][integration]") {
  TempDir dir("epochs");
  // 230 bytes, 10% held out: 207 training bytes, (207 - 1) / 16 = 12 sequences an epoch.
  // 4 samples a step: the first epoch ends after step 3.
  std::string text;
  for (int i = 0; text.size() < 230; ++i) text += "line " + std::to_string(i) + " of text. ";
  text.resize(230);
  write_text(dir / "corpus.txt", text);
  const fs::path spec = dir / "job.yaml";
  write_text(spec,
             "name: epochs\nseed: 4\n"
             "model: {vocab_size: 256, seq_len: 16, n_layer: 2, n_head: 2, d_model: 16}\n"
             "data: {type: text, path: corpus.txt, val_fraction: 0.1}\n"
             "training: {steps: 7, micro_batch_size: 2, global_batch_size: 4, eval_every: 0}\n"
             "checkpoint: {every_steps: 1, keep_last: 10, async: false}\n"
             "logging: {every_steps: 1}\nruntime: {comm_timeout_s: 60}\n");
  const ProcResult straight = train(dir.path(), spec, "straight");
  INFO(straight.out << straight.err);
  REQUIRE(straight.exit_code == 0);
  CHECK_THAT(read_text(dir / "straight" / "logs" / "rank0.log"),
             Catch::Contains("12 sequences an epoch"));
  // The epochs differ in order but hold the same sequences: samples 0-11 and 12-23.
  const auto all = batches_of(dir / "straight");
  std::multiset<std::string> first, second;
  for (const auto& [key, hash] : all) {
    if (key.second < 12) first.insert(hash);
    if (key.second >= 12 && key.second < 24) second.insert(hash);
  }
  CHECK(first.size() == 12);
  CHECK(first == second);

  // Before (step 2: samples 0-7), at (step 3: 0-11) and after (step 4: 0-15) the boundary,
  // each resumed on another layout (and micro-batch).
  const std::map<int, std::vector<std::string>> layouts = {
      {2, {"--set", "parallel.dp=2"}},
      {3,
       {"--set", "parallel.dp=2", "--set", "parallel.pp=2", "--set",
        "training.micro_batch_size=1"}},
      {4, {"--set", "parallel.tp=2", "--set", "training.micro_batch_size=1"}}};
  for (const auto& [from, layout] : layouts) {
    const std::string run = "from" + std::to_string(from);
    std::vector<std::string> extra = {"--resume", step_dir(dir / "straight", from)};
    extra.insert(extra.end(), layout.begin(), layout.end());
    const ProcResult r = train(dir.path(), spec, run, extra);
    INFO("from step " << from << "\n" << r.out << r.err);
    REQUIRE(r.exit_code == 0);
    check_same_batches(dir / "straight", dir / run, from, 7);
  }
}

namespace {

// Two prepared directories, `web` and `code`, from different text with one tokenizer.
void prepare_sources(const TempDir& dir) {
  const fs::path tok = write_tiny_tokenizer(dir.path());
  std::string web, code;
  for (int i = 0; i < 80; ++i) web += "the theme of the thing is this, then that.\n";
  for (int i = 0; i < 80; ++i) code += "int x = f(y) + 42; return x * 7;\n";
  for (const auto& [name, text] : {std::pair{"web", web}, std::pair{"code", code}}) {
    write_text(dir / (std::string(name) + ".txt"), text);
    const ProcResult p = run_trainctl({"data", "prepare", "--tokenizer", tok.string(), "--input",
                                       (dir / (std::string(name) + ".txt")).string(), "--out",
                                       (dir / name).string(), "--val-fraction", "0.2"},
                                      dir.path());
    INFO(p.out << p.err);
    REQUIRE(p.exit_code == 0);
  }
}

std::string blend_spec(const std::string& sources) {
  return "name: blend\nseed: 2\n"
         "model: {vocab_size: 258, seq_len: 16, n_layer: 2, n_head: 2, d_model: 16}\n"
         "data:\n  type: blend\n  seed: 9\n  sources:\n" +
         sources +
         "training: {steps: 6, micro_batch_size: 2, global_batch_size: 8, eval_every: 3, "
         "eval_batches: 2}\n"
         "checkpoint: {every_steps: 3, async: false}\n"
         "logging: {every_steps: 1, tensorboard: true}\nruntime: {comm_timeout_s: 60}\n";
}

}  // namespace

TEST_CASE("a blend mixes its sources by weight, validates each and resumes on another layout",
          "[blend][resume][integration]") {
  TempDir dir("blend");
  prepare_sources(dir);
  const fs::path spec = dir / "job.yaml";
  write_text(spec, blend_spec("    - {path: web, weight: 0.7}\n"
                              "    - {path: code, weight: 0.3}\n"));
  const ProcResult straight = train(dir.path(), spec, "straight");
  INFO(straight.out << straight.err);
  REQUIRE(straight.exit_code == 0);

  // val_loss/<name> beside val_loss on the evaluated steps, in metrics.jsonl and TensorBoard.
  int evaluated = 0;
  std::istringstream in(read_text(dir / "straight" / "metrics.jsonl"));
  for (std::string line; std::getline(in, line);) {
    const json row = json::parse(line);
    if (!row.contains("val_loss")) continue;
    ++evaluated;
    CHECK(row["val_loss/web"].get<double>() > 0);
    CHECK(row["val_loss/code"].get<double>() > 0);
    CHECK(row["val_loss/web"].get<double>() != row["val_loss/code"].get<double>());
  }
  CHECK(evaluated == 2);
  bool in_tensorboard = false;
  for (const auto& f : fs::recursive_directory_iterator(dir / "straight" / "tb")) {
    if (f.is_regular_file()) {
      in_tensorboard =
          in_tensorboard || read_text(f.path()).find("val_loss/code") != std::string::npos;
    }
  }
  CHECK(in_tensorboard);

  // The tokens of each source, in the run directory and in the checkpoint.
  const json sources = json::parse(read_text(dir / "straight" / "data_sources.json"));
  CHECK(sources["samples_consumed"] == 48);
  int64_t total = 0;
  for (const json& s : sources["sources"]) {
    total += s["samples_consumed"].get<int64_t>();
    CHECK(s["tokens_consumed"].get<int64_t>() == s["samples_consumed"].get<int64_t>() * 16);
  }
  CHECK(total == 48);
  CHECK(sources["sources"][0]["name"] == "web");
  CHECK(std::abs(sources["sources"][0]["samples_consumed"].get<double>() - 0.7 * 48) < 2.0);
  const json meta =
      json::parse(read_text(fs::path(step_dir(dir / "straight", 3)) / "metadata.json"));
  REQUIRE(meta["data"]["sources"].size() == 2);
  CHECK(meta["data"]["sources"][0]["samples_consumed"].get<int64_t>() +
            meta["data"]["sources"][1]["samples_consumed"].get<int64_t>() ==
        24);

  // Every global batch in proportion: 8 samples, about 5.6 from web.
  const auto all = batches_of(dir / "straight");
  CHECK(all.size() == 48);

  // Resumed at step 3 on dp 2 x tp 2: the same samples, token for token.
  const ProcResult r = train(dir.path(), spec, "resumed",
                             {"--resume", step_dir(dir / "straight", 3), "--set", "parallel.dp=2",
                              "--set", "parallel.tp=2"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  check_same_batches(dir / "straight", dir / "resumed", 3, 6);
  CHECK(json::parse(read_text(dir / "resumed" / "data_sources.json"))["sources"] ==
        sources["sources"]);

  // New weights on resume: said, and each source goes on from its recorded position.
  const fs::path even = dir / "even.yaml";
  write_text(even, blend_spec("    - {path: web, weight: 0.5}\n"
                              "    - {path: code, weight: 0.5}\n"));
  const ProcResult changed =
      train(dir.path(), even, "changed",
            {"--resume", step_dir(dir / "straight", 3), "--set", "training.steps=4"});
  INFO(changed.out << changed.err);
  REQUIRE(changed.exit_code == 0);
  CHECK_THAT(changed.out + changed.err, Catch::Contains("data blend changed since the checkpoint"));
  const json after = json::parse(read_text(dir / "changed" / "data_sources.json"));
  CHECK(after["samples_consumed"] == 32);
  for (size_t k = 0; k < 2; ++k) {
    const int64_t before = meta["data"]["sources"][k]["samples_consumed"].get<int64_t>();
    const int64_t now = after["sources"][k]["samples_consumed"].get<int64_t>();
    CHECK(now - before >= 3);  // about half of the 8 samples of step 4 each
    CHECK(now - before <= 5);
  }
}

TEST_CASE("bad blends are refused before launch with exit 2 and the file named",
          "[blend][integration]") {
  TempDir dir("blendbad");
  prepare_sources(dir);
  write_text(dir / "zero.yaml", blend_spec("    - {path: web, weight: 0}\n"
                                           "    - {path: code, weight: 0}\n"));
  ProcResult zero = run_trainctl({"validate", (dir / "zero.yaml").string()}, dir.path());
  CHECK(zero.exit_code == 2);
  CHECK_THAT(zero.err, Catch::Contains("zero.yaml"));
  CHECK_THAT(zero.err, Catch::Contains("data.sources"));
  CHECK_THAT(zero.err, Catch::Contains("sum to 0"));

  write_text(dir / "neg.yaml", blend_spec("    - {path: web, weight: -1}\n"
                                          "    - {path: code, weight: 2}\n"));
  ProcResult neg = run_trainctl({"train", (dir / "neg.yaml").string()}, dir.path());
  CHECK(neg.exit_code == 2);
  CHECK_THAT(neg.err, Catch::Contains("data.sources[0].weight"));

  write_text(dir / "missing.yaml", blend_spec("    - {path: web, weight: 1}\n"
                                              "    - {path: books, weight: 1}\n"));
  ProcResult missing = run_trainctl({"train", (dir / "missing.yaml").string()}, dir.path());
  CHECK(missing.exit_code == 2);
  CHECK_THAT(missing.err, Catch::Contains("data.sources[1].path"));
  CHECK_THAT(missing.err, Catch::Contains((dir / "books").string()));
  CHECK_FALSE(fs::exists(dir / "runs"));  // refused before anything was made

  // A source whose files are broken is refused by the pre-launch check, naming the file.
  write_text(dir / "code" / "train_000000.bin", "garbage");
  write_text(dir / "broken.yaml", blend_spec("    - {path: web, weight: 1}\n"
                                             "    - {path: code, weight: 1}\n"));
  ProcResult broken = run_trainctl({"validate", (dir / "broken.yaml").string()}, dir.path());
  CHECK(broken.exit_code == 2);
  CHECK_THAT(broken.err, Catch::Contains("data.sources[1].path"));
  CHECK_THAT(broken.err, Catch::Contains("train_000000.bin"));
}

TEST_CASE("a vocabulary beyond 65536 ids is prepared as uint32 tokens, trained, sampled, evaluated",
          "[vocab][sample][eval][integration]") {
  TempDir dir("vocab32");
  const fs::path tok = write_large_tokenizer(dir.path());
  std::string text;
  for (int i = 0; i < 60; ++i) text += "dsab dyaa abcd dtcd zzzz ab ds, dsab.\n";
  write_text(dir / "corpus.txt", text);
  ProcResult prep = run_trainctl(
      {"data", "prepare", "--tokenizer", tok.string(), "--input", (dir / "corpus.txt").string(),
       "--out", (dir / "data").string(), "--val-fraction", "0.3"},
      dir.path(), std::chrono::seconds(120));
  INFO(prep.out << prep.err);
  REQUIRE(prep.exit_code == 0);
  CHECK(read_text(dir / "data" / "manifest.json").find("llm.c uint32") != std::string::npos);
  const fs::path spec = dir / "job.yaml";
  write_text(spec,
             "name: big-vocab\nseed: 5\n"
             "model: {vocab_size: 70001, seq_len: 8, n_layer: 1, n_head: 2, d_model: 16}\n"
             "data: {type: tokens, path: data}\n"
             "training: {steps: 2, micro_batch_size: 2, global_batch_size: 2, eval_batches: 1}\n"
             "runtime: {comm_timeout_s: 60}\n");
  ProcResult v = run_trainctl({"validate", spec.string()}, dir.path(), std::chrono::seconds(120));
  INFO(v.out << v.err);
  REQUIRE(v.exit_code == 0);
  // The largest id in the data: "dyaa" (932 + 102 * 676 = 69884 > 65535).
  CHECK_THAT(v.out, Catch::Contains("ids 0.." + std::to_string(large_tokenizer_id("dyaa"))));
  const fs::path run = dir / "run";
  ProcResult t = run_trainctl({"train", spec.string(), "--set", "run_dir=" + run.string()},
                              dir.path(), std::chrono::seconds(180));
  INFO(t.out << t.err);
  REQUIRE(t.exit_code == 0);

  ProcResult s = run_trainctl(
      {"sample", run.string(), "--prompt", "dsab", "--max-new-tokens", "4", "--seed", "3"},
      dir.path(), std::chrono::seconds(120));
  INFO(s.out << s.err);
  REQUIRE(s.exit_code == 0);
  CHECK(s.out.rfind("dsab", 0) == 0);
  ProcResult ev = run_trainctl(
      {"eval", spec.string(), "--set", "run_dir=" + run.string(), "--from", run.string()},
      dir.path(), std::chrono::seconds(120));
  INFO(ev.out << ev.err);
  REQUIRE(ev.exit_code == 0);
  CHECK_THAT(ev.out, Catch::Contains("val_loss"));

  // A model vocabulary below the tokenizer's is refused before launch.
  ProcResult small = run_trainctl({"validate", spec.string(), "--set", "model.vocab_size=65536"},
                                  dir.path(), std::chrono::seconds(120));
  CHECK(small.exit_code == 2);
  CHECK_THAT(small.err, Catch::Contains("at least 70001"));
}
