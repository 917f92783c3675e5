// `trainctl selftest` end to end: the launcher spawns real workers that rendezvous through
// the store, build Gloo groups and verify every group's collectives.
#include <sys/stat.h>

#include <catch2/catch.hpp>

#include "comm/rank_coords.h"
#include "integration/helpers.h"

using namespace trainctl::test;
using namespace std::chrono_literals;

namespace {

// Each rank's log says the round passed and names every group it belongs to.
void check_rank_logs(const fs::path& run_dir, int dp, int tp, int pp) {
  trainctl::comm::Layout layout{dp, tp, pp};
  for (int r = 0; r < layout.world_size(); ++r) {
    INFO("rank " << r);
    std::string log = read_text(run_dir / "logs" / ("rank" + std::to_string(r) + ".log"));
    std::string expected =
        "self-test round 1/1 passed: verified world (" + std::to_string(layout.world_size()) +
        " ranks), dp[" + std::to_string(trainctl::comm::dp_group_index(layout, r)) + "] (" +
        std::to_string(dp) + " ranks), tp[" +
        std::to_string(trainctl::comm::tp_group_index(layout, r)) + "] (" + std::to_string(tp) +
        " ranks), pp[" + std::to_string(trainctl::comm::pp_group_index(layout, r)) + "] (" +
        std::to_string(pp) + " ranks)";
    CHECK_THAT(log, Catch::Contains(expected));
    CHECK_THAT(log, Catch::Contains("[rank " + std::to_string(r) + "/" +
                                    std::to_string(layout.world_size()) + "]"));
  }
}

}  // namespace

TEST_CASE("selftest passes at world sizes 1, 2, 4 and 8", "[launch][integration]") {
  struct Case {
    int dp, tp, pp;
    bool quick;
  };
  // World 2 runs the full message sizes; the others check the wiring with small ones.
  auto c =
      GENERATE(Case{1, 1, 1, true}, Case{2, 1, 1, false}, Case{1, 2, 2, true}, Case{2, 2, 2, true});
  INFO("layout " << c.dp << "x" << c.tp << "x" << c.pp);
  TempDir dir("selftest");
  fs::path job = write_job(dir.path(), "st", c.dp, c.tp, c.pp);
  std::vector<std::string> args{"selftest", job.string()};
  if (c.quick) args.push_back("--quick");
  ProcResult r = run_trainctl(args, dir.path(), 60s);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out,
             Catch::Contains("selftest passed: " + std::to_string(c.dp * c.tp * c.pp) + " ranks"));
  fs::path run_dir = dir / "runs/st";
  CHECK(fs::exists(run_dir / "config.resolved.yaml"));
  struct stat st {};
  REQUIRE(::stat((run_dir / ".rendezvous_token").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  check_rank_logs(run_dir, c.dp, c.tp, c.pp);
  CHECK(processes_mentioning(dir.path().string()).empty());
}

TEST_CASE("two launchers on one machine act as two nodes", "[launch][integration]") {
  TempDir dir("twonode");
  fs::path job = write_job(dir.path(), "two", 2, 2, 1);
  const std::string port = std::to_string(free_port());
  // Node 1 first: it waits for node 0's store and token file.
  Proc node1({"selftest", job.string(), "--quick", "--nnodes", "2", "--node-rank", "1",
              "--master-addr", "127.0.0.1", "--master-port", port},
             dir.path());
  std::this_thread::sleep_for(300ms);
  Proc node0({"selftest", job.string(), "--quick", "--nnodes", "2", "--node-rank", "0",
              "--master-addr", "127.0.0.1", "--master-port", port},
             dir.path());
  ProcResult r0 = node0.wait(60s);
  ProcResult r1 = node1.wait(60s);
  INFO("node 0:\n" << r0.err << "\nnode 1:\n" << r1.err);
  CHECK(r0.exit_code == 0);
  CHECK(r1.exit_code == 0);
  CHECK_THAT(r0.out, Catch::Contains("selftest passed: 4 ranks"));
  CHECK_THAT(r1.err, Catch::Contains("all 2 nodes joined"));
  check_rank_logs(dir / "runs/two", 2, 2, 1);
  // Ranks 2 and 3 ran under node 1's launcher.
  CHECK_THAT(read_text(dir / "runs/two/logs/rank2.log"), Catch::Contains("node 1, local rank 0"));
}

TEST_CASE("a token given on the command line must match on every node", "[launch][integration]") {
  TempDir dir("token");
  fs::path job = write_job(dir.path(), "tok", 2, 1, 1);
  const std::string port = std::to_string(free_port());
  Proc node0({"selftest", job.string(), "--quick", "--nnodes", "2", "--node-rank", "0",
              "--master-port", port, "--token", "right"},
             dir.path());
  Proc node1({"selftest", job.string(), "--quick", "--nnodes", "2", "--node-rank", "1",
              "--master-port", port, "--token", "wrong"},
             dir.path());
  ProcResult r1 = node1.wait(30s);
  INFO(r1.err);
  CHECK(r1.exit_code == 5);
  CHECK_THAT(r1.err, Catch::Contains("rejected the job token"));
  node0.signal(SIGTERM);
  ProcResult r0 = node0.wait(30s);
  CHECK(r0.exit_code == 4);
  CHECK(processes_mentioning(dir.path().string()).empty());
}
