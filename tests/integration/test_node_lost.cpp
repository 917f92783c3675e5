// A node whose launcher is gone is named by the others however they learn of it (issue
// 36): their workers may fail at once, hang until the watchdog, or not notice at all, and
// node 0's store may vanish. Two launchers on this machine act as nodes 0 and 1; node 1 is
// frozen (SIGSTOP on its launcher and workers: a host that went down), so node 0's workers
// wait in their collectives instead of failing. tests/multihost/test_failures.sh kills a
// launcher between real hosts.
#include <catch2/catch.hpp>

#include "integration/helpers.h"

using namespace trainctl::test;
using namespace std::chrono_literals;

namespace {

// Waits until `rank` has passed a self-test round, then returns its pid.
pid_t running_worker_pid(const fs::path& run_dir, int rank) {
  const fs::path log = run_dir / "logs" / ("rank" + std::to_string(rank) + ".log");
  bool running =
      eventually([&] { return read_text(log).find("round 1/") != std::string::npos; }, 60s);
  REQUIRE(running);
  pid_t pid = worker_pid_from_log(log);
  REQUIRE(pid > 0);
  return pid;
}

// Node `node` of a two-node soak self-test (4 ranks: 2 and 3 on node 1).
std::vector<std::string> node_args(const fs::path& job, int node, const std::string& port,
                                   int comm_timeout_s) {
  return {"selftest",
          job.string(),
          "--quick",
          "--repeat",
          "1000000",
          "--nnodes",
          "2",
          "--node-rank",
          std::to_string(node),
          "--master-port",
          port,
          "--set",
          "runtime.comm_timeout_s=" + std::to_string(comm_timeout_s)};
}

struct FrozenNode1 {
  ProcResult node0;
  double seconds = 0;  // from the freeze to node 0's launcher's exit
};

// Starts both nodes, freezes node 1 once every rank runs, and waits for node 0's launcher.
// Node 1 is killed afterwards (its workers die with its launcher).
FrozenNode1 freeze_node1(const TempDir& dir, const std::string& name, int comm_timeout_s) {
  const fs::path job = write_job(dir.path(), name, 4, 1, 1);
  const std::string port = std::to_string(free_port());
  Proc node0(node_args(job, 0, port, comm_timeout_s), dir.path());
  Proc node1(node_args(job, 1, port, comm_timeout_s), dir.path());
  const fs::path run_dir = dir / "runs" / name;
  running_worker_pid(run_dir, 0);
  const pid_t workers[] = {running_worker_pid(run_dir, 2), running_worker_pid(run_dir, 3)};
  node1.signal(SIGSTOP);
  for (pid_t w : workers) ::kill(w, SIGSTOP);
  const auto frozen_at = Clock::now();
  FrozenNode1 out;
  out.node0 = node0.wait(60s);
  out.seconds = std::chrono::duration<double>(Clock::now() - frozen_at).count();
  node1.signal(SIGKILL);
  for (pid_t w : workers) ::kill(w, SIGKILL);
  node1.wait(10s);
  return out;
}

}  // namespace

TEST_CASE("a frozen node is named by the other node's launcher long before the watchdog",
          "[launch][integration][timing]") {
  TempDir dir("frozen-node");
  // The watchdog would end the job only after 60 s: the heartbeats must do it first.
  const FrozenNode1 r = freeze_node1(dir, "frozen", 60);
  INFO("node 0:\n" << r.node0.err);
  CHECK_FALSE(r.node0.timed_out);
  CHECK(r.node0.exit_code == 3);
  // 5 s without a heartbeat, 3 s for the stuck workers to stop, 1 s for the others to read
  // the reason, and room for a loaded machine.
  CHECK(r.seconds < 30.0);
  CHECK_THAT(r.node0.err,
             Catch::Contains("node 1 (127.0.0.1) stopped responding (its launcher was killed"));
  CHECK(eventually([&] { return processes_mentioning(dir.path().string()).empty(); }, 10s));
}

TEST_CASE("a frozen node is named even when a worker's watchdog stops the job first",
          "[launch][integration][timing]") {
  TempDir dir("frozen-node-watchdog");
  // The watchdog (4 s) fires about when node 1's heartbeat is found silent (5 s): either
  // way the launcher must name node 1, not only the ranks the watchdog waited for.
  const FrozenNode1 r = freeze_node1(dir, "frozenwd", 4);
  INFO("node 0:\n" << r.node0.err);
  CHECK_FALSE(r.node0.timed_out);
  CHECK(r.node0.exit_code == 3);
  CHECK_THAT(r.node0.err,
             Catch::Contains("node 1 (127.0.0.1) stopped responding (its launcher was killed"));
  CHECK(eventually([&] { return processes_mentioning(dir.path().string()).empty(); }, 10s));
}
