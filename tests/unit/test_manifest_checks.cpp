// manifest.json of a prepared directory is checked, not believed (issue 36): the
// tokenizer's recorded hash, a shard listed twice, a validation shard that is a training
// shard, a vocab_size below the shards' ids and an eot_id outside the vocabulary are each
// refused with an InputError (exit 2) naming the file, the field and what to do.
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>

#include "config/load.h"
#include "data/dataset.h"
#include "data/manifest.h"
#include "data/prepare.h"
#include "test_scratch.h"
#include "tiny_tokenizer.h"
#include "train/data_check.h"

using namespace trainctl;
using trainctl::test::input_error_of;
namespace fs = std::filesystem;
using Json = nlohmann::json;

namespace {

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A prepared directory (tiny tokenizer: vocab_size 258, eot 257) with 3 training shards and
// one validation shard, and a job spec training from it.
struct Prepared {
  trainctl::test::ScratchDir scratch{"manifest_checks"};
  fs::path dir = scratch.path / "prepared";

  Prepared() {
    const auto tok = tokenizer::load_tokenizer(test::write_tiny_tokenizer(scratch.path));
    std::string text;
    for (int i = 0; i < 200; ++i) text += "the other thing " + std::to_string(i) + "\n";
    std::ofstream(scratch.path / "corpus.txt") << text;
    data::PrepareOptions o;
    o.input = scratch.path / "corpus.txt";
    o.out_dir = dir;
    o.val_fraction = 0.1;
    o.shard_tokens = 1200;
    data::prepare_tokens(tok, o);
    std::ofstream(scratch.path / "job.yaml")
        << "name: m\nmodel: {vocab_size: 300, seq_len: 16, n_layer: 1, n_head: 2, d_model: 16}\n"
           "data: {type: tokens, path: prepared}\n";
  }
  Json manifest() const {
    std::ifstream in(dir / "manifest.json");
    return Json::parse(in);
  }
  void write(const Json& doc) const { std::ofstream(dir / "manifest.json") << doc.dump(2); }
  std::string check_error() const {
    return input_error_of(
        [&] { train::check_data(config::load_job_spec(scratch.path / "job.yaml")); });
  }
  std::string dataset_error() const {
    data::DatasetOptions d;
    d.type = "tokens";
    d.path = dir;
    d.vocab_size = 300;
    d.seq_len = 16;
    d.val_fraction = 0.1;
    return input_error_of([&] { data::make_dataset(d); });
  }
};

}  // namespace

TEST_CASE("a tokenizer replaced after data prepare is refused by its recorded hash", "[data]") {
  Prepared p;
  CHECK(train::check_data(config::load_job_spec(p.scratch.path / "job.yaml")).find("prepared") !=
        std::string::npos);
  const data::TokenManifest m = data::read_manifest(p.dir);
  CHECK(data::verified_tokenizer_file(p.dir, m) == p.dir / "tokenizer.json");

  // Another tokenizer in its place (one more merge: other ids for the same text).
  Json doc = Json::parse(std::ifstream(p.dir / "tokenizer.json"));
  doc["model"]["vocab"]["he"] = 258;
  doc["added_tokens"][0]["id"] = 259;
  doc["model"]["merges"].push_back("h e");
  std::ofstream(p.dir / "tokenizer.json") << doc.dump();
  const std::string e = input_error_of([&] { data::verified_tokenizer_file(p.dir, m); });
  CHECK(has(e, "tokenizer.json: the tokenizer's files hash to fnv1a64:"));
  CHECK(has(e, "manifest.json (tokenizer.hash) records " + m.tokenizer_hash));
  CHECK(has(e, "Restore the files the directory was prepared with, or prepare it again"));
  // `validate`, `train` and `eval` check the data before anything starts.
  CHECK(has(p.check_error(), "job.yaml: data.path: "));
  CHECK(has(p.check_error(), "(tokenizer.hash) records"));

  fs::remove(p.dir / "tokenizer.json");
  CHECK(has(input_error_of([&] { data::verified_tokenizer_file(p.dir, m); }), "tokenizer.json"));
}

TEST_CASE("a shard listed twice, or in both splits, is refused", "[data]") {
  Prepared p;
  Json twice = p.manifest();
  REQUIRE(twice["train"]["shards"].size() >= 2);
  twice["train"]["shards"][1] = twice["train"]["shards"][0];
  p.write(twice);
  CHECK(has(input_error_of([&] { data::read_manifest(p.dir); }),
            "manifest.json: train.shards lists train_000000.bin twice; it would be trained on "
            "twice as often"));
  CHECK(has(p.dataset_error(), "lists train_000000.bin twice"));

  Json fresh = twice;
  fresh["train"]["shards"][1]["file"] = "train_000001.bin";
  fresh["val"]["shards"][0] = fresh["train"]["shards"][0];
  p.write(fresh);
  CHECK(has(p.check_error(), "val.shards lists train_000000.bin, which is also a training shard"));

  // One file under two names (a hard link) is the same shard twice.
  Json linked = fresh;
  linked["val"]["shards"][0]["file"] = "val_copy.bin";
  fs::create_hard_link(p.dir / "train_000000.bin", p.dir / "val_copy.bin");
  p.write(linked);
  CHECK(has(p.check_error(), "val_copy.bin: is the same file as another shard"));
  CHECK(has(p.dataset_error(), "val_copy.bin: is the same file as another shard"));
}

TEST_CASE("a vocab_size below the shards' ids is refused, the ids are scanned anyway", "[data]") {
  Prepared p;
  Json doc = p.manifest();
  doc["vocab_size"] = 200;  // the shards hold 256 (th); the model has 300
  doc["tokenizer"]["eot_id"] = nullptr;
  p.write(doc);
  CHECK(has(p.check_error(), "contains token id 256 but manifest.json's vocab_size is 200"));
  CHECK(has(p.dataset_error(), "contains token id 256 but manifest.json's vocab_size is 200"));
}

TEST_CASE("an eot_id outside the vocabulary and a malformed hash are refused", "[data]") {
  Prepared p;
  Json doc = p.manifest();
  const Json hash = doc["tokenizer"]["hash"];
  doc["tokenizer"]["eot_id"] = 258;
  p.write(doc);
  CHECK(has(input_error_of([&] { data::read_manifest(p.dir); }),
            "manifest.json: tokenizer.eot_id 258 is outside the vocabulary (vocab_size 258: ids "
            "0..257)"));
  doc["tokenizer"]["eot_id"] = -1;
  p.write(doc);
  CHECK(has(p.check_error(), "tokenizer.eot_id -1 is outside the vocabulary"));
  doc["tokenizer"]["eot_id"] = 257;
  doc["tokenizer"]["hash"] = "sha256:0";
  p.write(doc);
  CHECK(has(p.check_error(), "tokenizer.hash 'sha256:0' is not \"fnv1a64:<16 hex digits>\""));
  doc["tokenizer"]["hash"] = hash;
  doc["tokenizer"]["files"] = {"train_000000.bin"};
  p.write(doc);
  CHECK(has(p.check_error(),
            "tokenizer.files: 'train_000000.bin' is not a plain file name "
            "listed once, apart from the shards"));
}

TEST_CASE("parse_manifest reads back what format_manifest writes", "[data]") {
  Prepared p;
  const data::TokenManifest m = data::read_manifest(p.dir);
  CHECK(m.train.size() >= 2);
  CHECK(data::parse_manifest(data::format_manifest(m), "m.json") == m);
  data::TokenManifest no_eot = m;
  no_eot.eot_id.reset();
  CHECK(data::parse_manifest(data::format_manifest(no_eot), "m.json") == no_eot);
}

TEST_CASE("a number beyond double in manifest.json or a JSONL document is an InputError",
          "[data]") {
  // nlohmann::json reports it as out_of_range, not parse_error: it escaped as a crash.
  CHECK(has(input_error_of([] { data::parse_manifest("{\"vocab_size\": 1e400}", "m.json"); }),
            "m.json: not valid JSON"));
  Prepared p;
  std::ofstream(p.scratch.path / "big.jsonl") << "{\"text\": \"the\", \"n\": 1e400}\n";
  data::PrepareOptions o;
  o.input = p.scratch.path / "big.jsonl";
  o.out_dir = p.scratch.path / "out";
  const auto tok = tokenizer::load_tokenizer(p.scratch.path / "tokenizer.json");
  CHECK(
      has(input_error_of([&] { data::prepare_tokens(tok, o); }), "big.jsonl:1: not a JSON object"));
}

TEST_CASE("data prepare over a directory whose manifest is refused says how to get out", "[data]") {
  Prepared p;
  Json doc = p.manifest();
  doc["val"]["shards"][0] = doc["train"]["shards"][0];
  p.write(doc);
  data::PrepareOptions o;
  o.input = p.scratch.path / "corpus.txt";
  o.out_dir = p.dir;
  const auto tok = tokenizer::load_tokenizer(p.scratch.path / "tokenizer.json");
  const std::string e = input_error_of([&] { data::prepare_tokens(tok, o); });
  CHECK(has(e, "which is also a training shard"));
  CHECK(has(e, "holds that manifest: remove the directory or give another --out"));
}
