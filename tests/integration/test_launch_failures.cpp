// The launcher's supervision: a dying worker stops the job with exit code 3 and names the
// rank; a stop signal ends it with exit code 4; no worker outlives its launcher.
#include <catch2/catch.hpp>

#include "integration/helpers.h"

using namespace trainctl::test;
using namespace std::chrono_literals;

namespace {

// Waits until `rank` has passed a self-test round, then returns its pid.
pid_t running_worker_pid(const fs::path& run_dir, int rank) {
  const fs::path log = run_dir / "logs" / ("rank" + std::to_string(rank) + ".log");
  bool running =
      eventually([&] { return read_text(log).find("round 1/") != std::string::npos; }, 30s);
  REQUIRE(running);
  pid_t pid = worker_pid_from_log(log);
  REQUIRE(pid > 0);
  return pid;
}

std::vector<std::string> soak_args(const fs::path& job) {
  return {"selftest", job.string(), "--quick", "--repeat", "1000000"};
}

}  // namespace

TEST_CASE("a worker killed with SIGKILL fails the job with exit code 3, naming the rank",
          "[launch][integration]") {
  TempDir dir("sigkill");
  fs::path job = write_job(dir.path(), "kill", 4, 1, 1);
  Proc launcher(soak_args(job), dir.path());
  pid_t victim = running_worker_pid(dir / "runs/kill", 2);
  auto killed_at = Clock::now();
  ::kill(victim, SIGKILL);
  ProcResult r = launcher.wait(30s);
  double seconds = std::chrono::duration<double>(Clock::now() - killed_at).count();
  INFO(r.err);
  CHECK(r.exit_code == 3);
  CHECK(seconds < 8.0);
  CHECK_THAT(r.err, Catch::Contains("rank 2 on node 0 failed: killed by signal 9 (SIGKILL)"));
  CHECK_THAT(r.err, Catch::Contains("lines of " + (dir / "runs/kill/logs/rank2.log").string()));
  CHECK_THAT(r.err, Catch::Contains("| [rank 2/4]"));
  CHECK(processes_mentioning(dir.path().string()).empty());
}

TEST_CASE("SIGTERM to the launcher stops the workers and exits with code 4",
          "[launch][integration]") {
  TempDir dir("sigterm");
  fs::path job = write_job(dir.path(), "term", 2, 1, 1);
  Proc launcher(soak_args(job), dir.path());
  running_worker_pid(dir / "runs/term", 1);
  launcher.signal(SIGTERM);
  ProcResult r = launcher.wait(30s);
  INFO(r.err);
  CHECK(r.exit_code == 4);
  CHECK_THAT(r.err, Catch::Contains("received SIGTERM"));
  CHECK(processes_mentioning(dir.path().string()).empty());
  // The workers ended on their own (stop request honoured), not by SIGKILL.
  CHECK_THAT(read_text(dir / "runs/term/logs/rank0.log"), Catch::Contains("stopping after"));
}

TEST_CASE("workers die with a launcher killed by SIGKILL", "[launch][integration]") {
  TempDir dir("orphans");
  fs::path job = write_job(dir.path(), "orphan", 2, 1, 1);
  Proc launcher(soak_args(job), dir.path());
  pid_t worker = running_worker_pid(dir / "runs/orphan", 1);
  launcher.signal(SIGKILL);
  launcher.wait(10s);
  // PR_SET_PDEATHSIG: the kernel kills the workers when the launcher dies.
  CHECK(eventually([&] { return processes_mentioning(dir.path().string()).empty(); }, 5s));
  CHECK_FALSE(process_alive(worker));
}

namespace {
// One of two launchers on this machine acting as nodes 0 and 1 of a soak self-test.
std::vector<std::string> two_node_soak_args(const fs::path& job, int node,
                                            const std::string& port) {
  std::vector<std::string> a = soak_args(job);
  a.insert(a.end(), {"--nnodes", "2", "--node-rank", std::to_string(node), "--master-port", port});
  return a;
}
}  // namespace

TEST_CASE("a worker failing on one node stops the launchers of every node",
          "[launch][integration]") {
  TempDir dir("abort");
  fs::path job = write_job(dir.path(), "abort", 4, 1, 1);
  const std::string port = std::to_string(free_port());
  auto args = [&](int node) { return two_node_soak_args(job, node, port); };
  Proc node0(args(0), dir.path());
  Proc node1(args(1), dir.path());
  pid_t victim = running_worker_pid(dir / "runs/abort", 3);  // on node 1
  ::kill(victim, SIGKILL);
  ProcResult r1 = node1.wait(30s);
  ProcResult r0 = node0.wait(30s);
  INFO("node 0:\n" << r0.err << "\nnode 1:\n" << r1.err);
  CHECK(r1.exit_code == 3);
  CHECK(r0.exit_code == 3);
  CHECK_THAT(r1.err, Catch::Contains("rank 3 on node 1 failed: killed by signal 9 (SIGKILL)"));
  CHECK_THAT(r0.err, Catch::Contains("SIGKILL"));
  CHECK(processes_mentioning(dir.path().string()).empty());
}

TEST_CASE("when node 0's launcher dies, the other nodes stop too", "[launch][integration]") {
  TempDir dir("lostmaster");
  fs::path job = write_job(dir.path(), "lost", 2, 1, 1);
  const std::string port = std::to_string(free_port());
  auto args = [&](int node) { return two_node_soak_args(job, node, port); };
  Proc node0(args(0), dir.path());
  Proc node1(args(1), dir.path());
  running_worker_pid(dir / "runs/lost", 1);
  node0.signal(SIGKILL);
  node0.wait(10s);
  ProcResult r1 = node1.wait(30s);
  INFO(r1.err);
  CHECK(r1.exit_code == 3);
  // Whichever it notices first (a worker failing, or the store gone), node 1 names node 0.
  CHECK_THAT(r1.err, Catch::Contains("node 0 (127.0.0.1, whose rendezvous store is gone) "
                                     "stopped responding"));
  CHECK(eventually([&] { return processes_mentioning(dir.path().string()).empty(); }, 5s));
}

TEST_CASE("with runtime.max_restarts the launcher restarts all workers after a failure",
          "[launch][integration]") {
  TempDir dir("restart");
  fs::path job = write_job(dir.path(), "restart", 2, 1, 1);
  Proc launcher({"selftest", job.string(), "--quick", "--repeat", "1000000", "--set",
                 "runtime.max_restarts=1"},
                dir.path());
  const fs::path log = dir / "runs/restart/logs/rank1.log";
  ::kill(running_worker_pid(dir / "runs/restart", 1), SIGKILL);
  // Attempt 1 starts with fresh workers that rendezvous under a new store prefix.
  REQUIRE(eventually(
      [&] {
        std::string text = read_text(log);
        size_t second = text.find("attempt 1");
        return second != std::string::npos && text.find("round 1/", second) != std::string::npos;
      },
      30s));
  ::kill(worker_pid_from_log(log), SIGKILL);  // no restarts left
  ProcResult r = launcher.wait(30s);
  INFO(r.err);
  CHECK(r.exit_code == 3);
  CHECK_THAT(r.err, Catch::Contains("restarting all workers (restart 1 of 1)"));
  CHECK(processes_mentioning(dir.path().string()).empty());
}
