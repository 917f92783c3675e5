// The hang watchdog end to end: a rank that stalls before a collective (the
// TEST_TRAINCTL_STALL test hook) ends the job within runtime.comm_timeout_s plus a few
// seconds, with a report naming the call, its group and the rank that never reached it.
#include <catch2/catch.hpp>

#include "integration/helpers.h"

using namespace trainctl::test;
using namespace std::chrono_literals;

TEST_CASE("a stalled rank is reported by the watchdog and the job exits non-zero in time",
          "[launch][integration][watchdog]") {
  TempDir dir("watchdog");
  fs::path job = write_job(dir.path(), "hang", 4, 1, 1);
  Proc launcher({"selftest", job.string(), "--quick", "--set", "runtime.comm_timeout_s=3"},
                dir.path(),
                {{"TEST_TRAINCTL_STALL", "rank=1,group=dp,op=allreduce,call=1,seconds=600"}});
  ProcResult r = launcher.wait(40s);
  INFO(r.err);
  CHECK_FALSE(r.timed_out);
  CHECK(r.exit_code == 3);
  // Startup (4 workers on 2 cores) + the 3 s timeout + the report + the launcher's stop.
  CHECK(r.seconds < 15.0);
  CHECK_THAT(r.err, Catch::Contains("collective timed out after 3 s: allreduce #1 on dp[0]"));
  CHECK_THAT(r.err, Catch::Contains("Reached it: ranks 0, 2, 3. Not reached: rank 1 (idle for"));
  CHECK_THAT(r.err, Catch::Contains("on world (0 B))."));  // rank 1's last call: a world barrier
  // The stalled rank logged that the hook was armed; the reporting rank's log has the report.
  CHECK_THAT(read_text(dir / "runs/hang/logs/rank1.log"), Catch::Contains("test hook"));
  CHECK_THAT(read_text(dir / "runs/hang/logs/rank0.log"),
             Catch::Contains("Not reached: rank 1 (idle for"));
  CHECK(eventually([&] { return processes_mentioning(dir.path().string()).empty(); }, 5s));
}
