// Resume refuses what it cannot load exactly (issue 15): an explicit --resume PATH whose
// metadata.json is edited or out of range exits 2 naming the checkpoint and the field
// before any worker starts, and trains nothing (no fallback, no start from scratch, no step
// directory overwritten);
// --resume auto warns on the console for every checkpoint it skips and why, and exits 2
// when step directories exist but none is usable.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "checkpoint/metadata_checksum.h"
#include "integration/helpers.h"

using namespace trainctl::test;
using nlohmann::json;
namespace ck = trainctl::checkpoint;

namespace {

fs::path job(const fs::path& dir) { return write_small_job(dir, {.name = "resume-checks"}); }

ProcResult train(const fs::path& dir, const std::string& run, std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"train", job(dir).string(), "--set", "run_dir=" + run};
  args.insert(args.end(), extra.begin(), extra.end());
  Proc p(args, dir);
  return p.wait(std::chrono::seconds(120));
}

// Everything the user sees: the console and rank 0's log.
std::string seen(const fs::path& run, const ProcResult& r) {
  const fs::path log = run / "logs" / "rank0.log";
  return r.out + r.err + (fs::exists(log) ? read_text(log) : std::string());
}

// A copy of the trained run `base` as `name`, so each case damages its own.
fs::path copy_run(const fs::path& dir, const std::string& name) {
  fs::copy(dir / "base", dir / name, fs::copy_options::recursive);
  return dir / name;
}

// Sets one field of a checkpoint's metadata.json, fixing its checksum (a careful edit, so
// the range check itself is what refuses it).
void set_field(const fs::path& step_dir, const std::string& pointer, const json& value) {
  json doc = json::parse(read_text(step_dir / "metadata.json"));
  doc[json::json_pointer(pointer)] = value;
  doc[ck::kMetadataChecksumKey] = ck::metadata_checksum(doc);
  write_text(step_dir / "metadata.json", doc.dump(2));
}

}  // namespace

TEST_CASE("resume refuses a checkpoint it cannot load exactly", "[resume]") {
  TempDir dir("resume-checks");
  const ProcResult base = train(dir.path(), "base");
  INFO(base.out << base.err);
  REQUIRE(base.exit_code == 0);

  SECTION("an explicit path with an out-of-range step trains nothing") {
    for (const json& bad : {json(-7), json(1e15), json(1000000000000000)}) {
      INFO("step " << bad.dump());
      const fs::path run = copy_run(dir.path(), "bad-step");
      const fs::path step8 = run / "checkpoints" / "step_00000008";
      set_field(step8, "/step", bad);
      const std::string metrics = read_text(run / "metrics.jsonl");
      const std::string meta4 = read_text(run / "checkpoints" / "step_00000004" / "metadata.json");
      const ProcResult r = train(dir.path(), run.string(), {"--resume", step8.string()});
      INFO(r.out << r.err);
      CHECK(r.exit_code == 2);
      CHECK_THAT(r.err, Catch::Contains((step8 / "metadata.json").string() + ": \"step\" is"));
      CHECK_THAT(r.out + r.err, !Catch::Contains("started 1 worker"));  // refused before launch
      CHECK(read_text(run / "metrics.jsonl") == metrics);               // not a single step trained
      CHECK(read_text(run / "checkpoints" / "step_00000004" / "metadata.json") == meta4);
      fs::remove_all(run);
    }
  }

  SECTION("an explicit path whose metadata.json was edited is refused") {
    const fs::path run = copy_run(dir.path(), "edited");
    const fs::path step8 = run / "checkpoints" / "step_00000008";
    std::string text = read_text(step8 / "metadata.json");
    text.replace(text.find("\"step\": 8"), 9, "\"step\": 7");
    write_text(step8 / "metadata.json", text);
    const ProcResult r = train(dir.path(), run.string(), {"--resume", step8.string()});
    INFO(r.out << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("metadata.json was modified after it was written"));
    CHECK_THAT(r.err, Catch::Contains("(--resume " + step8.string() + ")"));
    CHECK_THAT(r.out + r.err, !Catch::Contains("started 1 worker"));
  }

  SECTION("a negative optimizer step is refused naming the checkpoint") {
    const fs::path run = copy_run(dir.path(), "optim");
    const fs::path step8 = run / "checkpoints" / "step_00000008";
    set_field(step8, "/optimizer_step", -1);
    const ProcResult r = train(dir.path(), run.string(), {"--resume", step8.string()});
    INFO(r.out << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(seen(run, r),
               Catch::Contains((step8 / "metadata.json").string() +
                               ": \"optimizer_step\" is -1; it must be an integer in [0, 8]"));
  }

  SECTION("auto warns for a newest checkpoint without metadata.json and resumes before it") {
    const fs::path run = copy_run(dir.path(), "auto");
    const fs::path step8 = run / "checkpoints" / "step_00000008";
    fs::remove(step8 / "metadata.json");
    const ProcResult r = train(dir.path(), run.string());
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains("warning: checkpoint " + step8.string() +
                                      " is damaged and was skipped: " + step8.string() +
                                      " is not a complete checkpoint: it has no metadata.json"));
    CHECK_THAT(r.out,
               Catch::Contains("resumed from " + (run / "checkpoints" / "step_00000004").string() +
                               ": step 4"));
    CHECK(read_text(run / "model.safetensors") ==
          read_text(dir.path() / "base" / "model.safetensors"));
  }

  SECTION("auto skips a symbolic link loop newer than latest with a warning") {
    const fs::path run = copy_run(dir.path(), "loop");
    const fs::path loop = run / "checkpoints" / "step_00000012";
    fs::create_directory_symlink("step_00000012", loop);
    const ProcResult r = train(dir.path(), run.string(), {"--set", "training.steps=10"});
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains("warning: checkpoint " + loop.string() +
                                      " is newer but was skipped: it is damaged: cannot read"));
    CHECK_THAT(r.out,
               Catch::Contains("resumed from " + (run / "checkpoints" / "step_00000008").string()));
  }

  SECTION("auto with every checkpoint damaged exits 2 instead of starting over") {
    const fs::path run = copy_run(dir.path(), "all-bad");
    fs::remove(run / "checkpoints" / "step_00000008" / "metadata.json");
    const fs::path step4 = run / "checkpoints" / "step_00000004";
    set_field(step4, "/data/samples_consumed", json(9223372036854775808ULL));
    const std::string meta4 = read_text(step4 / "metadata.json");
    const ProcResult r = train(dir.path(), run.string());
    INFO(r.out << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.out, Catch::Contains("\"data.samples_consumed\" is 9223372036854775808"));
    CHECK_THAT(seen(run, r),
               Catch::Contains("no usable checkpoint in " + (run / "checkpoints").string() +
                               ": all 2 are damaged"));
    CHECK(read_text(step4 / "metadata.json") == meta4);  // nothing overwritten
  }
}
