// `trainctl data prepare` and training from its directory: shards and manifest, JSONL and
// folders, end-of-text separators, the dataset over the shards, and the inputs refused.
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>

#include "config/load.h"
#include "data/dataset.h"
#include "data/manifest.h"
#include "data/prepare.h"
#include "data/token_file.h"
#include "large_tokenizer.h"
#include "test_scratch.h"
#include "tiny_tokenizer.h"
#include "train/data_check.h"

using namespace trainctl;
using trainctl::test::input_error_of;
namespace fs = std::filesystem;

namespace {

std::vector<uint32_t> all_tokens(const fs::path& dir) {
  const data::TokenManifest m = data::read_manifest(dir);
  std::vector<uint32_t> out;
  for (const auto* split : {&m.train, &m.val}) {
    for (const data::ShardEntry& s : *split) {
      const data::TokenFile f(dir / s.file);
      for (size_t i = 0; i < f.size(); ++i) out.push_back(f.token(i));
    }
  }
  return out;
}

}  // namespace

TEST_CASE("data prepare writes llm.c shards, a manifest and the tokenizer", "[data]") {
  trainctl::test::ScratchDir dir("prepare");
  const auto tok = tokenizer::load_tokenizer(test::write_tiny_tokenizer(dir.path));
  fs::create_directories(dir.path / "in" / "sub");
  std::ofstream(dir.path / "in" / "a.txt") << "the cat";
  std::ofstream(dir.path / "in" / "sub" / "b.jsonl") << "{\"text\": \"th\"}\n\n{\"text\": \"x\"}\n";
  std::ofstream(dir.path / "in" / "skip.csv") << "not read";
  data::PrepareOptions o;
  o.input = dir.path / "in";
  o.out_dir = dir.path / "out";
  o.val_fraction = 0.25;
  o.threads = 2;
  o.shard_tokens = 3;
  const data::PrepareSummary s = data::prepare_tokens(tok, o);
  // "the cat" -> th e ␠ c a t; documents separated by <|endoftext|> (257).
  const std::vector<uint32_t> expected = {256, 'e', ' ', 'c', 'a', 't', 257, 256, 257, 'x'};
  CHECK(all_tokens(o.out_dir) == expected);
  const data::TokenManifest m = data::read_manifest(o.out_dir);
  CHECK(m.vocab_size == 258);
  CHECK(m.documents == 3);
  CHECK(m.eot_id == 257);
  CHECK(m.tokenizer_hash == tok.hash);
  CHECK(m.train_tokens() == 8);  // 10 tokens, the last 2 (floor(2.5)) held out
  CHECK(m.val_tokens() == 2);
  CHECK(m.train.size() == 3);  // 3 + 3 + 2
  CHECK(s.train_tokens == 8);
  CHECK(fs::exists(o.out_dir / "tokenizer.json"));

  // A second run replaces the first one's shards.
  o.shard_tokens = 100;
  data::prepare_tokens(tok, o);
  CHECK(data::read_manifest(o.out_dir).train.size() == 1);
  CHECK_FALSE(fs::exists(o.out_dir / "train_000002.bin"));
}

TEST_CASE("data prepare refuses empty, non-UTF-8 and malformed input", "[data]") {
  trainctl::test::ScratchDir dir("prepare_bad");
  const auto tok = tokenizer::load_tokenizer(test::write_tiny_tokenizer(dir.path));
  data::PrepareOptions o;
  o.out_dir = dir.path / "out";
  auto error_for = [&](const std::string& name, const std::string& content) {
    std::ofstream(dir.path / name) << content;
    o.input = dir.path / name;
    return input_error_of([&] { data::prepare_tokens(tok, o); });
  };
  CHECK(error_for("empty.txt", "").find("empty.txt: the input is empty") != std::string::npos);
  CHECK(error_for("latin1.txt", "caf\xE9").find("latin1.txt: not UTF-8 text") != std::string::npos);
  CHECK(error_for("bad.jsonl", "{\"text\": 1}\n").find("bad.jsonl:1: each JSONL line") !=
        std::string::npos);
  CHECK(error_for("blank.jsonl", "\n\n").find("the input is empty") != std::string::npos);
  std::ofstream(dir.path / "file") << "x";
  o.out_dir = dir.path / "file";
  CHECK(error_for("ok.txt", "text").find("not a directory") != std::string::npos);
}

TEST_CASE(
    "a tokens directory trains, a model.vocab_size below the tokenizer's is refused at its line",
    "[data]") {
  trainctl::test::ScratchDir dir("prepare_train");
  const auto tok = tokenizer::load_tokenizer(test::write_tiny_tokenizer(dir.path));
  std::string text;
  for (int i = 0; i < 300; ++i) text += "the other thing " + std::to_string(i) + "\n";
  std::ofstream(dir.path / "corpus.txt") << text;
  data::PrepareOptions o;
  o.input = dir.path / "corpus.txt";
  o.out_dir = dir.path / "prepared";
  o.val_fraction = 0.1;
  o.shard_tokens = 1000;
  data::prepare_tokens(tok, o);

  std::ofstream(dir.path / "job.yaml")
      << "name: bpe\nmodel: {vocab_size: 300, seq_len: 16, n_layer: 1, n_head: 2, d_model: 16}\n"
         "data: {type: tokens, path: prepared}\n";
  const config::JobSpec spec = config::load_job_spec(dir.path / "job.yaml");
  CHECK(train::check_data(spec).find("prepared tokens") != std::string::npos);
  data::DatasetOptions d;
  d.type = "tokens";
  d.path = spec.data.path;
  d.vocab_size = 300;
  d.seq_len = 16;
  d.val_fraction = 0.1;
  const auto dataset = data::make_dataset(d);
  std::vector<int32_t> tokens(16), targets(16);
  dataset->sample(data::Split::train, 7, tokens.data(), targets.data());
  CHECK(std::equal(tokens.begin() + 1, tokens.end(), targets.begin()));  // shifted by one
  dataset->sample(data::Split::val, 0, tokens.data(), targets.data());

  const config::JobSpec small =
      config::load_job_spec(dir.path / "job.yaml", {"model.vocab_size=200"});
  CHECK(input_error_of([&] {
          train::check_data(small);
        }).find("--set model.vocab_size=200: model.vocab_size: is 200 but the tokenizer") == 0);
  std::ofstream(dir.path / "small.yaml")
      << "name: bpe\nmodel: {vocab_size: 256, seq_len: 16, n_layer: 1, n_head: 2, d_model: 16}\n"
         "data: {type: tokens, path: prepared}\n";
  const std::string e =
      input_error_of([&] { train::check_data(config::load_job_spec(dir.path / "small.yaml")); });
  CHECK(e.find("small.yaml:2:21: model.vocab_size: is 256 but the tokenizer of data.path") !=
        std::string::npos);
  CHECK(e.find("has 258 tokens; set model.vocab_size to at least 258") != std::string::npos);
  d.vocab_size = 256;
  CHECK(input_error_of([&] { data::make_dataset(d); }).find("the tokenizer has 258 tokens") !=
        std::string::npos);
}

TEST_CASE("data prepare writes uint32 shards for a vocabulary beyond 65536 ids", "[data][vocab]") {
  trainctl::test::ScratchDir dir("prepare32");
  const auto tok = tokenizer::load_tokenizer(test::write_large_tokenizer(dir.path));
  REQUIRE(tok.tokenizer.vocab_size() == 70001);
  std::ofstream(dir.path / "a.txt") << "dsab dyaa abcd";
  data::PrepareOptions o;
  o.input = dir.path / "a.txt";
  o.out_dir = dir.path / "out";
  o.val_fraction = 0;
  data::prepare_tokens(tok, o);
  const data::TokenManifest m = data::read_manifest(o.out_dir);
  CHECK(m.vocab_size == 70001);
  REQUIRE(m.train.size() == 1);
  const data::TokenFile f(o.out_dir / m.train[0].file);
  CHECK(f.format() == "llm.c uint32");
  // "dsab", " " + "dyaa" (Ġ then the word), " " + "abcd".
  const std::vector<uint32_t> expected = {
      static_cast<uint32_t>(test::large_tokenizer_id("dsab")), 32,
      static_cast<uint32_t>(test::large_tokenizer_id("dyaa")), 32,
      static_cast<uint32_t>(test::large_tokenizer_id("abcd"))};
  CHECK(all_tokens(o.out_dir) == expected);
  CHECK(expected[0] > 65535);
  CHECK_THAT(data::format_manifest(m), Catch::Contains("llm.c uint32"));
}
