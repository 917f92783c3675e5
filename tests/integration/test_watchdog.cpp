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

TEST_CASE("a stopped worker (SIGSTOP) is named as the rank that did not arrive, marked stale",
          "[launch][integration][watchdog]") {
  TempDir dir("watchdog-stop");
  const fs::path job = dir / "stop.yaml";
  write_text(job,
             "name: stop\nmodel: {vocab_size: 64, seq_len: 16, n_layer: 1, n_head: 2, "
             "d_model: 16}\nparallel: {dp: 2}\n"
             "training: {steps: 1000000, micro_batch_size: 1, global_batch_size: 2}\n"
             "checkpoint: {every_steps: 0}\nlogging: {every_steps: 1000}\n"
             "runtime: {comm_timeout_s: 3, comm_selftest: false}\n");
  Proc launcher({"train", job.string()}, dir.path());
  const fs::path log1 = dir / "runs/stop/logs/rank1.log";
  // Training is under way once rank 0 has logged its first step.
  REQUIRE(eventually(
      [&] {
        return read_text(dir / "runs/stop/logs/rank0.log").find("step 1/") != std::string::npos;
      },
      30s));
  const pid_t rank1 = worker_pid_from_log(log1);
  REQUIRE(rank1 > 0);
  ::kill(rank1, SIGSTOP);
  ProcResult r = launcher.wait(40s);
  ::kill(rank1, SIGCONT);  // in case the launcher did not reap it (it SIGKILLs it)
  INFO(r.err);
  CHECK(r.exit_code == 3);
  // The launcher leads with rank 0's report, which names rank 1 as stale, not rank 0.
  CHECK_THAT(r.err, Catch::Contains("rank 0 on node 0 stopped the job after "
                                    "runtime.comm_timeout_s: collective timed out after 3 s"));
  CHECK_THAT(r.err, Catch::Contains("Not reached: rank 1 (STALE: no heartbeat for"));
  CHECK_THAT(r.err, Catch::Contains("Likely cause: rank 1, which stopped reporting."));
  CHECK_THAT(r.err, !Catch::Contains("rank 0 on node 0 failed"));
  CHECK(eventually([&] { return processes_mentioning(dir.path().string()).empty(); }, 5s));
}
