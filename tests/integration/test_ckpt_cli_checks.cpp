// `trainctl ckpt verify|export|info` on checkpoints damaged the ways issue 15 found: an
// edited metadata.json, an empty file list, a newest checkpoint that is damaged in a run
// directory, a symbolic link loop as a step directory, an export pointed into a checkpoint.
// Each is refused with exit code 2 and a message naming the checkpoint and what is wrong.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "checkpoint/metadata_checksum.h"
#include "integration/helpers.h"
#include "unit/test_checkpoint_support.h"

using namespace trainctl::test;
namespace ck = trainctl::checkpoint;
namespace ckt = trainctl::checkpoint::testing;
using nlohmann::json;

namespace {

// A run directory with two committed checkpoints of a tp 2 × pp 2 run; latest is step 20.
fs::path make_run(const fs::path& run) {
  ckt::save_checkpoint(run / "checkpoints", {2, 2, 1}, 10);
  return ckt::save_checkpoint(run / "checkpoints", {2, 2, 1}, 20);
}

void replace_once(const fs::path& file, const std::string& from, const std::string& to) {
  std::string text = read_text(file);
  const size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  write_text(file, text.replace(at, from.size(), to));
}

}  // namespace

TEST_CASE("an edited step in metadata.json fails verify, info and export", "[ckpt][integration]") {
  TempDir dir("ckpt-edit");
  const fs::path step = make_run(dir / "run");
  replace_once(step / "metadata.json", "\"step\": 20", "\"step\": 21");

  ProcResult v = run_trainctl({"ckpt", "verify", step.string()}, dir.path());
  INFO(v.out << v.err);
  CHECK(v.exit_code == 2);
  CHECK_THAT(v.err, Catch::Contains((step / "metadata.json").string() +
                                    ": metadata.json was modified after it was written"));
  CHECK_THAT(v.out, Catch::Contains("checkpoint DAMAGED: metadata.json cannot be used"));

  ProcResult i = run_trainctl({"ckpt", "info", step.string()}, dir.path());
  CHECK(i.exit_code == 2);
  CHECK_THAT(i.err, Catch::Contains("was modified after it was written"));

  ProcResult e = run_trainctl(
      {"ckpt", "export", step.string(), "--out", (dir / "m.safetensors").string()}, dir.path());
  CHECK(e.exit_code == 2);
  CHECK_THAT(e.err, Catch::Contains("was modified after it was written"));
  CHECK_FALSE(fs::exists(dir / "m.safetensors"));
}

TEST_CASE("an empty file list is refused and nothing is exported", "[ckpt][integration]") {
  TempDir dir("ckpt-empty");
  const fs::path step = make_run(dir / "run");
  json doc = json::parse(read_text(step / "metadata.json"));
  doc["files"] = json::array();
  doc[ck::kMetadataChecksumKey] = ck::metadata_checksum(doc);  // a careful edit
  write_text(step / "metadata.json", doc.dump(2));

  ProcResult v = run_trainctl({"ckpt", "verify", step.string()}, dir.path());
  INFO(v.out << v.err);
  CHECK(v.exit_code == 2);
  CHECK_THAT(v.err, Catch::Contains("the checkpoint holds no tensors"));
  CHECK_THAT(v.out, Catch::Contains("checkpoint DAMAGED"));
  ProcResult e = run_trainctl(
      {"ckpt", "export", step.string(), "--out", (dir / "m.safetensors").string()}, dir.path());
  INFO(e.out << e.err);
  CHECK(e.exit_code == 2);
  CHECK_THAT(e.err, Catch::Contains("holds no tensors"));
  CHECK_FALSE(fs::exists(dir / "m.safetensors"));
}

TEST_CASE("ckpt verify of a run checks every checkpoint and names the newest valid one",
          "[ckpt][integration]") {
  TempDir dir("ckpt-run");
  const fs::path step20 = make_run(dir / "run");
  const fs::path ckpts = dir / "run" / "checkpoints";
  ProcResult ok = run_trainctl({"ckpt", "verify", (dir / "run").string()}, dir.path());
  INFO(ok.out << ok.err);
  CHECK(ok.exit_code == 0);
  CHECK_THAT(ok.out, Catch::Contains("verifying 2 checkpoints in " + ckpts.string() +
                                     " (latest names step_00000020)"));
  CHECK_THAT(ok.out, Catch::Contains("OK       step_00000020: 4 files"));
  CHECK_THAT(ok.out, Catch::Contains("newest valid checkpoint: " + step20.string() + " (step 20)"));
  CHECK_THAT(ok.out, Catch::Contains("all 2 checkpoints OK"));

  fs::remove(step20 / "metadata.json");
  fs::create_directory_symlink("step_00000030", ckpts / "step_00000030");  // a loop
  ProcResult bad = run_trainctl({"ckpt", "verify", ckpts.string()}, dir.path());
  INFO(bad.out << bad.err);
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.out, Catch::Contains("DAMAGED  step_00000030: cannot read") &&
                          Catch::Contains("symbolic links"));
  CHECK_THAT(bad.out, Catch::Contains("DAMAGED  step_00000020: " + step20.string() +
                                      " is not a complete checkpoint: it has no metadata.json"));
  CHECK_THAT(bad.out, Catch::Contains("OK       step_00000010"));
  CHECK_THAT(bad.out,
             Catch::Contains("newest valid checkpoint: " + (ckpts / "step_00000010").string() +
                             " (step 10); every newer one is damaged"));
  CHECK_THAT(bad.out, Catch::Contains("2 of 3 checkpoints DAMAGED"));

  // Named directly, the loop is an error about the path (exit 2), not a raw filesystem error.
  ProcResult loop = run_trainctl({"ckpt", "info", (ckpts / "step_00000030").string()}, dir.path());
  CHECK(loop.exit_code == 2);
  CHECK_THAT(loop.err,
             Catch::Contains("cannot read checkpoint") && Catch::Contains("symbolic links"));
  // The run's latest is damaged: info/export of the run refuse instead of using step 10.
  ProcResult info = run_trainctl({"ckpt", "info", (dir / "run").string()}, dir.path());
  CHECK(info.exit_code == 2);
  CHECK_THAT(info.err,
             Catch::Contains("the newest usable one is " + (ckpts / "step_00000010").string()));
}

TEST_CASE("ckpt export refuses an output inside the checkpoint it reads", "[ckpt][integration]") {
  TempDir dir("ckpt-out");
  const fs::path step = make_run(dir / "run");
  const fs::path shard = step / "rank_00000.safetensors";
  const std::string before = read_text(shard);
  ProcResult e =
      run_trainctl({"ckpt", "export", step.string(), "--out", shard.string()}, dir.path());
  INFO(e.out << e.err);
  CHECK(e.exit_code == 2);
  CHECK_THAT(e.err, Catch::Contains("it is inside the checkpoint " + step.string()));
  CHECK(read_text(shard) == before);
  CHECK(run_trainctl({"ckpt", "verify", step.string()}, dir.path()).exit_code == 0);
}
