// A full disk is an environment problem the user fixes, not a worker crash (issue 15): the
// run exits 2 at once (no restart into the same wall) naming the file that could not be
// written and the reason, the last complete checkpoint stays intact, and once there is
// space again the run resumes, removing the unfinished save.
#include <sys/mount.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "integration/helpers.h"

using namespace trainctl::test;
using namespace std::chrono_literals;

namespace {

fs::path job(const fs::path& dir) {
  return write_small_job(
      dir, {.name = "full",
            .parallel = "{tp: 2}",
            .checkpoint = "{every_steps: 4, keep_last: 3, async: true}",
            .runtime = "{comm_timeout_s: 60, max_restarts: 2, comm_selftest: false}"});
}

ProcResult train(const fs::path& dir, const fs::path& run) {
  Proc p({"train", job(dir).string(), "--set", "run_dir=" + run.string()}, dir);
  return p.wait(120s);
}

// Unmounts at scope exit (a failing CHECK must not leave a mount behind).
struct TmpfsMount {
  fs::path at;
  bool mounted = false;
  TmpfsMount(fs::path where, const std::string& size) : at(std::move(where)) {
    fs::create_directories(at);
    mounted = ::mount("tmpfs", at.c_str(), "tmpfs", 0, ("size=" + size).c_str()) == 0;
  }
  bool resize(const std::string& size) const {
    return ::mount("tmpfs", at.c_str(), "tmpfs", MS_REMOUNT, ("size=" + size).c_str()) == 0;
  }
  ~TmpfsMount() {
    if (mounted) ::umount2(at.c_str(), MNT_DETACH);
  }
};

}  // namespace

TEST_CASE("metrics.jsonl on a full disk stops the run with exit 2, not a restart",
          "[launch][integration]") {
  TempDir dir("disk-full");
  const fs::path run = dir / "run";
  fs::create_directories(run);
  // Every write to /dev/full fails with ENOSPC, as on a file system with no space left.
  fs::create_symlink("/dev/full", run / "metrics.jsonl");
  const ProcResult r = train(dir.path(), run);
  INFO(r.out << r.err);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.out, Catch::Contains("error: cannot write " + (run / "metrics.jsonl").string() +
                                    ": No space left on device"));
  CHECK_THAT(r.err, !Catch::Contains("restarting"));
}

TEST_CASE("a checkpoint on a full disk keeps the previous one and resumes once there is space",
          "[launch][integration]") {
  TempDir dir("disk-full-ckpt");
  // Room for the logs and one checkpoint (~350 KiB, both tp ranks writing a share) but not
  // for a second one: whichever rank hits the wall first, the job ends with 2.
  TmpfsMount disk(dir / "disk", "600k");
  if (!disk.mounted) {
    WARN("skipped: mounting a small tmpfs needs root (CAP_SYS_ADMIN)");
    return;
  }
  const fs::path run = disk.at / "run";
  const ProcResult full = train(dir.path(), run);
  INFO(full.out << full.err);
  CHECK(full.exit_code == 2);
  CHECK_THAT(full.out + full.err,
             Catch::Contains("No space left on device") && Catch::Contains(".tmp_step_00000008"));
  CHECK_THAT(full.err, !Catch::Contains("restarting"));
  CHECK_THAT(full.err, Catch::Contains("note: the file system holding " + run.string()));
  const ProcResult verify =
      run_trainctl({"ckpt", "verify", (run / "checkpoints/step_00000004").string()}, dir.path());
  CHECK(verify.exit_code == 0);
  CHECK(read_text(run / "checkpoints/latest").find("step_00000004") != std::string::npos);

  REQUIRE(disk.resize("8m"));
  const ProcResult resumed = train(dir.path(), run);
  INFO(resumed.out << resumed.err);
  CHECK(resumed.exit_code == 0);
  CHECK_THAT(resumed.out, Catch::Contains("removed " + (run / "checkpoints").string() +
                                          "/.tmp_step_00000008: an unfinished checkpoint"));
  CHECK_THAT(resumed.out,
             Catch::Contains("resumed from " + (run / "checkpoints/step_00000004").string()));
  CHECK(fs::exists(run / "checkpoints/step_00000008/metadata.json"));
}
