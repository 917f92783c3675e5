// metadata.json is loaded exactly as it says or refused: its own checksum catches an edit,
// every field is range-checked with a message naming the file and the field, and format 1
// (before the checksum) is still read.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "checkpoint/errors.h"
#include "checkpoint/metadata_checksum.h"
#include "checkpoint/reader.h"
#include "test_checkpoint_support.h"
#include "util/error.h"

using namespace trainctl;
using namespace trainctl::checkpoint;
using namespace trainctl::checkpoint::testing;
using nlohmann::json;

namespace {

const ShardLayout kSaved{2, 1, 1};

std::string text_of(const fs::path& file) {
  std::ifstream in(file);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

json doc_of(const fs::path& dir) { return json::parse(text_of(dir / kMetadataFile)); }

// Writes `doc` as dir/metadata.json with a checksum that matches it: what a deliberate edit
// that also fixes the checksum looks like, so the field checks themselves are exercised.
void write_resummed(const fs::path& dir, json doc) {
  doc[kMetadataChecksumKey] = metadata_checksum(doc);
  std::ofstream(dir / kMetadataFile) << doc.dump(2);
}

std::string error_of(const fs::path& dir) {
  try {
    read_metadata(dir);
  } catch (const CheckpointCorrupt& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("metadata.json's checksum detects an edit of any value", "[checkpoint]") {
  ScratchDir dir;
  write_all_ranks(dir.path(), kSaved, 20);
  const json doc = doc_of(dir.path());
  REQUIRE(doc.at("format_version") == kFormatVersion);
  REQUIRE(doc.at(kMetadataChecksumKey).get<std::string>().rfind("crc32c:", 0) == 0);

  std::string text = text_of(dir / kMetadataFile);
  const size_t at = text.find("\"step\": 20");
  REQUIRE(at != std::string::npos);
  text.replace(at, 10, "\"step\": 21");
  std::ofstream(dir / kMetadataFile) << text;
  CHECK_THROWS_AS(CheckpointReader(dir.path()), CheckpointCorrupt);
  CHECK_THAT(error_of(dir.path()),
             Catch::Contains((dir / kMetadataFile).string()) &&
                 Catch::Contains("metadata.json was modified after it was written") &&
                 Catch::Contains("resume from another checkpoint"));

  // The same number spelled differently is an edit too; re-indenting is not.
  std::ofstream(dir / kMetadataFile)
      << doc.dump(2).replace(doc.dump(2).find("\"step\": 20"), 10, "\"step\": 20.0");
  CHECK_THAT(error_of(dir.path()), Catch::Contains("was modified after it was written"));
  std::ofstream(dir / kMetadataFile) << doc.dump(7);
  CHECK(read_metadata(dir.path()).step == 20);

  json no_sum = doc;
  no_sum.erase(kMetadataChecksumKey);
  std::ofstream(dir / kMetadataFile) << no_sum.dump(2);
  CHECK_THAT(error_of(dir.path()), Catch::Contains("\"metadata_checksum\" is missing"));
}

TEST_CASE("format 1 metadata (no checksum) is still read and its fields checked", "[checkpoint]") {
  ScratchDir dir;
  write_all_ranks(dir.path(), kSaved, 5);
  json doc = doc_of(dir.path());
  doc.erase(kMetadataChecksumKey);
  doc["format_version"] = 1;
  std::ofstream(dir / kMetadataFile) << doc.dump(2);
  CheckpointReader reader(dir.path());
  CHECK_FALSE(metadata_is_protected(reader.metadata()));
  CHECK(reader.metadata().step == 5);
  reader.verify();
  // Rewritten as format 1 it stays format 1 (no checksum is invented).
  CHECK_FALSE(to_json(reader.metadata()).contains(kMetadataChecksumKey));
  doc["step"] = -7;
  std::ofstream(dir / kMetadataFile) << doc.dump(2);
  CHECK_THAT(error_of(dir.path()), Catch::Contains("\"step\" is -7"));

  doc["format_version"] = 3;
  std::ofstream(dir / kMetadataFile) << doc.dump(2);
  CHECK_THROWS_AS(read_metadata(dir.path()), InputError);
  CHECK_THROWS_WITH(read_metadata(dir.path()), Catch::Contains("upgrade trainctl"));
}

TEST_CASE("every field of metadata.json is range-checked, naming the file and the field",
          "[checkpoint]") {
  ScratchDir dir;
  write_all_ranks(dir.path(), kSaved, 5);
  const json good = doc_of(dir.path());
  struct Case {
    std::string pointer;
    json value;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"/step", -7, "\"step\" is -7; it must be an integer in [0, 2147483647]"},
      {"/step", 1e15, "\"step\" is 1e+15; it must be an integer"},
      {"/step", 1000000000000000, "\"step\" is 1000000000000000; it must be an integer"},
      {"/step", 5.5, "\"step\" is 5.5"},
      {"/step", "5", "\"step\" is \"5\""},
      {"/optimizer_step", -1, "\"optimizer_step\" is -1; it must be an integer in [0, 5]"},
      {"/optimizer_step", 6, "\"optimizer_step\" is 6"},
      {"/data/samples_consumed", 9223372036854775808ULL,
       "\"data.samples_consumed\" is 9223372036854775808"},
      {"/data/samples_consumed", -1, "\"data.samples_consumed\" is -1"},
      {"/data/next_step", 7, "\"data.next_step\" is 7; it must be an integer in [5, 5]"},
      {"/layout/dp", 0, "\"layout.dp\" is 0"},
      {"/layout/zero", 4, "\"layout.zero\" is 4"},
      {"/model/n_layer", 0, "\"model.n_layer\" is 0"},
      {"/model/n_head", 3, "\"model.n_head\" does not divide d_model"},
      {"/files/0/rank", -1, "\"files[0].rank\" is -1"},
      {"/files/1/rank", 0, "\"files[1].rank\" lists a rank twice"},
      {"/files/0/bytes", -5, "\"files[0].bytes\" is -5"},
      {"/files/0/checksum", "crc32c:zz", "\"files[0].checksum\" is not \"crc32c:\""},
      {"/files/0/name", "../x", "\"files[0].name\" is \"../x\""},
      {"/files/0/tensors/0/global_shape/0", -4, "\"files[0].tensors[0].global_shape[0]\" is -4"},
      {"/files/0/tensors/0/index", 5, "describes an impossible shard"},
      {"/files/0/tensors/1/name", "transformer.wte.weight", "a second time"},
      {"/files", json::array(), "the checkpoint holds no tensors"},
      {"/extra", 5, "\"extra\" is not a JSON object"},
  };
  for (const Case& c : cases) {
    INFO(c.pointer << " = " << c.value.dump());
    json doc = good;
    doc[json::json_pointer(c.pointer)] = c.value;
    write_resummed(dir.path(), doc);
    const std::string error = error_of(dir.path());
    CHECK_THAT(error,
               Catch::Contains((dir / kMetadataFile).string()) && Catch::Contains(c.message));
  }
  json missing = good;
  missing["data"].erase("samples_consumed");
  write_resummed(dir.path(), missing);
  CHECK_THAT(error_of(dir.path()), Catch::Contains("\"data.samples_consumed\" is missing"));
  write_resummed(dir.path(), good);
  CHECK(read_metadata(dir.path()).data.samples_consumed == 5 * 64);
}

TEST_CASE("a step directory whose metadata.json names another step is refused", "[checkpoint]") {
  ScratchDir run;
  const fs::path step = save_checkpoint(run / "checkpoints", kSaved, 20);
  json doc = doc_of(step);
  doc["step"] = 21;
  doc["data"]["next_step"] = 21;
  write_resummed(step, doc);
  CHECK_THAT(error_of(step), Catch::Contains("\"step\" is 21 but the directory is step_00000020"));
}

TEST_CASE("a checkpoint missing a rank's file, a tensor or an optimizer state is incomplete",
          "[checkpoint]") {
  ScratchDir dir;
  write_all_ranks(dir.path(), kSaved, 5);
  const CheckpointMetadata good = read_metadata(dir.path());
  auto problems_with = [&](const CheckpointMetadata& m) {
    write_metadata(dir.path(), m);
    CheckpointReader reader(dir.path());
    std::string all;
    for (const std::string& p : reader.check_coverage()) all += p + "\n";
    CHECK_THROWS_AS(reader.verify(), CheckpointCorrupt);
    return all;
  };
  CheckpointMetadata m = good;
  m.files.pop_back();
  CHECK_THAT(problems_with(m),
             Catch::Contains("metadata.json lists no file from rank(s) 1 of the 2 ranks of the "
                             "layout that wrote it (dp 1 x tp 2 x pp 1)"));

  m = good;
  for (FileRecord& f : m.files) {
    std::erase_if(f.tensors,
                  [](const TensorRecord& t) { return t.name == "transformer.h.2.ln_1.weight"; });
  }
  CHECK_THAT(problems_with(m),
             Catch::Contains(dir.path().string() + " is incomplete: it holds no "
                                                   "transformer.h.2.ln_1.weight (its model: "));

  m = good;
  for (FileRecord& f : m.files) {
    std::erase_if(f.tensors, [](const TensorRecord& t) {
      return t.name == "optim.exp_avg.transformer.wte.weight";
    });
  }
  CHECK_THAT(problems_with(m), Catch::Contains("it holds no optim.exp_avg.transformer.wte.weight"));

  m = good;
  m.files[0].tensors[0].name = "transformer.h.9.ln_1.weight";
  CHECK_THAT(problems_with(m),
             Catch::Contains("holds transformer.h.9.ln_1.weight, which is not part of its model"));
}

TEST_CASE("a llama model's fields round-trip through metadata.json and are range-checked",
          "[checkpoint]") {
  ScratchDir dir;
  write_all_ranks(dir.path(), kSaved, 5);
  json doc = doc_of(dir.path());
  // GPT metadata carries no family (checkpoints written before llama existed read the same).
  CHECK_FALSE(doc["model"].contains("family"));
  CHECK(read_metadata(dir.path()).model.family == trainctl::model::Family::gpt);
  doc["model"]["family"] = "llama";
  doc["model"]["n_kv_head"] = 1;
  doc["model"]["ffn_hidden"] = 48;
  doc["model"]["norm_eps"] = 1e-6;
  doc["model"]["rope_theta"] = 500000.0;
  doc["model"]["tie_embeddings"] = true;
  write_resummed(dir.path(), doc);
  const trainctl::model::ModelConfig m = read_metadata(dir.path()).model;
  CHECK(m.llama());
  CHECK(m.kv_heads() == 1);
  CHECK(m.mlp_hidden() == 48);
  CHECK(m.norm_eps == 1e-6f);
  CHECK(m.rope_theta == 500000.0f);
  CHECK(m.tie_embeddings);
  // Written back (as float values widened to double), it reads as the same model.
  const CheckpointMetadata meta = read_metadata(dir.path());
  CHECK(metadata_from_json(to_json(meta), "x").model == meta.model);
  const std::vector<std::pair<std::string, json>> bad = {
      {"family", "mamba"}, {"n_kv_head", 3},      {"ffn_hidden", 0},
      {"norm_eps", 2.0},   {"rope_theta", "big"}, {"tie_embeddings", 1}};
  for (const auto& [key, value] : bad) {
    INFO(key << " = " << value.dump());
    json broken = doc;
    broken["model"][key] = value;
    write_resummed(dir.path(), broken);
    CHECK_THAT(error_of(dir.path()), Catch::Contains("\"model." + key + "\""));
  }
}
