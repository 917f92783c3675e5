// The checkpoints/ directory protocol: temporary directories are never complete, `latest`
// follows commits, keep_last prunes only after a new checkpoint is complete, and a crash
// between writing and renaming leaves the previous checkpoint as the one to resume from.
#include <catch2/catch.hpp>

#include <fstream>

#include "checkpoint/commit.h"
#include "test_checkpoint_support.h"
#include "util/error.h"

using namespace trainctl;
using namespace trainctl::checkpoint;
using namespace trainctl::checkpoint::testing;

namespace {

const ShardLayout kLayout{2, 1, 1};

std::vector<int64_t> steps(const fs::path& checkpoints) {
  std::vector<int64_t> out;
  for (const CheckpointEntry& e : list_complete(checkpoints)) out.push_back(e.step);
  return out;
}

std::string latest_text(const fs::path& checkpoints) {
  std::ifstream in(checkpoints / kLatestFile);
  std::string line;
  std::getline(in, line);
  return line;
}

}  // namespace

TEST_CASE("names of step and temporary directories", "[checkpoint]") {
  CHECK(step_dir_name(42) == "step_00000042");
  CHECK(step_dir_name(123456789) == "step_123456789");
  CHECK(tmp_dir_for("ck", 42) == fs::path("ck/.tmp_step_00000042"));
}

TEST_CASE("commit renames, points latest at the new checkpoint and prunes", "[checkpoint]") {
  ScratchDir run;
  const fs::path ck = run / "checkpoints";
  const fs::path tmp = begin_checkpoint(ck, 10);
  write_all_ranks(tmp, kLayout, 10);
  CHECK(steps(ck).empty());  // a temporary directory is never complete
  CHECK_FALSE(latest_checkpoint(ck));

  const fs::path first = commit_checkpoint(tmp, ck, 10, 2);
  CHECK(first == ck / "step_00000010");
  CHECK_FALSE(fs::exists(tmp));
  CHECK(latest_text(ck) == "step_00000010");
  CHECK(steps(ck) == std::vector<int64_t>{10});

  save_checkpoint(ck, kLayout, 20, 2);
  save_checkpoint(ck, kLayout, 30, 2);
  CHECK(steps(ck) == std::vector<int64_t>{20, 30});  // keep_last 2: step 10 removed
  CHECK(latest_text(ck) == "step_00000030");
  CHECK(*latest_checkpoint(ck) == ck / "step_00000030");

  save_checkpoint(ck, kLayout, 40, 0);  // keep_last 0: keep all
  CHECK(steps(ck) == std::vector<int64_t>{20, 30, 40});

  // Saving a step again (training resumed from an earlier checkpoint) replaces it.
  save_checkpoint(ck, kLayout, 30, 0);
  CHECK(steps(ck) == std::vector<int64_t>{20, 30, 40});
  CHECK(latest_text(ck) == "step_00000030");
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(ck)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  CHECK(names ==
        std::vector<std::string>{"latest", "step_00000020", "step_00000030", "step_00000040"});
}

TEST_CASE("a crash before the rename leaves the previous checkpoint as latest", "[checkpoint]") {
  ScratchDir run;
  const fs::path ck = run / "checkpoints";
  save_checkpoint(ck, kLayout, 100, 1);
  // The next save dies after writing its shards and even metadata.json, before the rename.
  const fs::path tmp = begin_checkpoint(ck, 200);
  write_all_ranks(tmp, kLayout, 200);
  CHECK(steps(ck) == std::vector<int64_t>{100});
  CHECK(*latest_checkpoint(ck) == ck / "step_00000100");
  CHECK(*resolve_resume(ck, "auto") == ck / "step_00000100");
  // A save that died before metadata.json: a step_ directory without it is not complete.
  fs::create_directories(ck / "step_00000300");
  std::ofstream(ck / "step_00000300" / "rank_00000.safetensors") << "partial";
  CHECK(steps(ck) == std::vector<int64_t>{100});

  // The next save clears the leftover temporary directory; pruning (keep_last 1) keeps
  // step 100 until step 200 is complete.
  const fs::path again = begin_checkpoint(ck, 200);
  CHECK(fs::is_empty(again));
  CHECK(fs::exists(ck / "step_00000100" / "metadata.json"));
  write_all_ranks(again, kLayout, 200);
  commit_checkpoint(again, ck, 200, 1);
  CHECK(steps(ck) == std::vector<int64_t>{200});
  CHECK(latest_text(ck) == "step_00000200");
}

TEST_CASE("latest falls back to the newest complete checkpoint", "[checkpoint]") {
  ScratchDir run;
  const fs::path ck = run / "checkpoints";
  save_checkpoint(ck, kLayout, 1);
  save_checkpoint(ck, kLayout, 2);
  fs::remove_all(ck / "step_00000002");  // deleted by hand: latest names nothing
  CHECK(*latest_checkpoint(ck) == ck / "step_00000001");
  fs::remove(ck / kLatestFile);
  CHECK(*latest_checkpoint(ck) == ck / "step_00000001");
}

TEST_CASE("resolve finds a checkpoint from a step, checkpoints or run directory", "[checkpoint]") {
  ScratchDir run;
  const fs::path ck = run / "checkpoints";
  save_checkpoint(ck, kLayout, 5);
  save_checkpoint(ck, kLayout, 6);
  CHECK(resolve_checkpoint(ck / "step_00000005") == ck / "step_00000005");
  CHECK(resolve_checkpoint(ck) == ck / "step_00000006");
  CHECK(resolve_checkpoint(run.path()) == ck / "step_00000006");
  CHECK_THROWS_AS(resolve_checkpoint(run / "nope"), InputError);
  CHECK_THROWS_WITH(resolve_checkpoint(run / "nope"), Catch::Contains("does not exist"));
  fs::create_directories(run / "empty");
  CHECK_THROWS_WITH(resolve_checkpoint(run / "empty"),
                    Catch::Contains("no complete checkpoint in"));

  CHECK_FALSE(resolve_resume(ck, "none"));
  CHECK(*resolve_resume(ck, "auto") == ck / "step_00000006");
  CHECK_FALSE(resolve_resume(run / "empty", "auto"));  // nothing saved yet: from scratch
  CHECK(*resolve_resume(ck, (ck / "step_00000005").string()) == ck / "step_00000005");
  CHECK_THROWS_AS(resolve_resume(ck, (run / "empty").string()), InputError);
}

TEST_CASE("commit refuses a directory without metadata.json", "[checkpoint]") {
  ScratchDir run;
  const fs::path ck = run / "checkpoints";
  const fs::path tmp = begin_checkpoint(ck, 3);
  write_shard(tmp, 0, rank_tensors(kLayout, 0).views());
  CHECK_THROWS_WITH(commit_checkpoint(tmp, ck, 3, 1), Catch::Contains("has no metadata.json"));
  CHECK(steps(ck).empty());
}
