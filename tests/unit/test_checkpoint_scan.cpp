// Finding checkpoints in a run: every step_<N> entry is listed with what is wrong with it
// (never a raw filesystem error, not even for a symbolic link loop), `--resume auto` tries
// the one `latest` names first, and a checkpoint named explicitly is never replaced by an
// older one.
#include <catch2/catch.hpp>

#include <fstream>

#include "checkpoint/commit.h"
#include "checkpoint/errors.h"
#include "checkpoint/export.h"
#include "test_checkpoint_support.h"
#include "util/error.h"

using namespace trainctl;
using namespace trainctl::checkpoint;
using namespace trainctl::checkpoint::testing;

namespace {
const ShardLayout kLayout{2, 1, 1};
}  // namespace

TEST_CASE("scan lists unusable step entries with their problem", "[checkpoint]") {
  ScratchDir run;
  const fs::path ck = run / "checkpoints";
  save_checkpoint(ck, kLayout, 4);
  save_checkpoint(ck, kLayout, 8);
  fs::create_directory_symlink("step_00000009", ck / "step_00000009");  // points at itself
  std::ofstream(ck / "step_00000007") << "not a directory";
  fs::remove(ck / "step_00000008" / kMetadataFile);

  const std::vector<CheckpointStatus> all = scan_checkpoints(ck);
  REQUIRE(all.size() == 4);
  CHECK(all[0].step == 9);
  CHECK_THAT(all[0].problem, Catch::Contains("cannot read") && Catch::Contains("step_00000009") &&
                                 Catch::Contains("symbolic links"));
  CHECK_THAT(all[1].problem, Catch::Contains("has no metadata.json"));
  CHECK_THAT(all[2].problem, Catch::Contains("is not a directory"));
  CHECK(all[3].problem.empty());
  CHECK(list_complete(ck).size() == 1);
  CHECK(*latest_checkpoint(ck) == ck / "step_00000004");

  // `latest` names step 8: auto tries it first, then the rest newest first.
  const std::vector<CheckpointStatus> order = auto_resume_order(ck);
  CHECK(order[0].step == 8);
  CHECK(order[1].step == 9);

  // Named explicitly, the loop and the damaged checkpoint are errors, not fallbacks.
  CHECK_THROWS_AS(resolve_checkpoint(ck / "step_00000009"), InputError);
  CHECK_THROWS_WITH(resolve_checkpoint(ck / "step_00000009"),
                    Catch::Contains("cannot read checkpoint") && Catch::Contains("symbolic links"));
  CHECK_THROWS_AS(resolve_checkpoint(ck / "step_00000008"), CheckpointCorrupt);
  CHECK_THROWS_AS(resolve_checkpoint(run.path()), CheckpointCorrupt);
  CHECK_THROWS_WITH(
      resolve_checkpoint(run.path()),
      Catch::Contains("step_00000008 is not a complete checkpoint") &&
          Catch::Contains("the newest usable one is " + (ck / "step_00000004").string()));
  CHECK(*resolve_resume(ck, "auto") == ck / "step_00000004");
  CHECK_THROWS_AS(resolve_resume(ck, run.path().string()), CheckpointCorrupt);
}

TEST_CASE("a looping checkpoints directory lists nothing instead of failing", "[checkpoint]") {
  ScratchDir run;
  fs::create_directory_symlink("checkpoints", run / "checkpoints");
  CHECK(scan_checkpoints(run / "checkpoints").empty());
  CHECK_FALSE(latest_checkpoint(run / "checkpoints"));
  CHECK_THROWS_AS(resolve_checkpoint(run / "checkpoints"), InputError);
}

TEST_CASE("export refuses an output inside a checkpoint directory", "[checkpoint]") {
  ScratchDir run;
  const fs::path ck = run / "checkpoints";
  const fs::path step4 = save_checkpoint(ck, kLayout, 4);
  const fs::path step8 = save_checkpoint(ck, kLayout, 8);
  CHECK_THROWS_AS(check_export_target(step8, step8 / "rank_00000.safetensors"), InputError);
  CHECK_THROWS_WITH(check_export_target(step8, step8 / "rank_00000.safetensors"),
                    Catch::Contains("it is inside the checkpoint " + step8.string()));
  CHECK_THROWS_AS(check_export_target(step8, step8 / "sub" / ".." / "model.safetensors"),
                  InputError);
  CHECK_THROWS_AS(check_export_target(step8, step4 / "model.safetensors"), InputError);
  // Through a symbolic link to the checkpoint.
  fs::create_directory_symlink(step8, run / "alias");
  CHECK_THROWS_AS(check_export_target(step8, run / "alias" / "rank_00001.safetensors"), InputError);
  CHECK_NOTHROW(check_export_target(step8, run / "model.safetensors"));
  CHECK_NOTHROW(check_export_target(step8, "model.safetensors"));
}
