// A worker reads its whole environment once (launch/worker_env.h): the launcher contract,
// the optional per-mode settings and the test hooks (launch/test_hooks.h).
#include <stdlib.h>

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "launch/worker_env.h"

using namespace trainctl::launch;

namespace {

const std::vector<const char*> kOptional = {"TRAINCTL_RESUME",          "TRAINCTL_SELFTEST_REPEAT",
                                            "TRAINCTL_SELFTEST_QUICK",  "TRAINCTL_BENCH_MIN_BYTES",
                                            "TRAINCTL_BENCH_MAX_BYTES", "TRAINCTL_BENCH_ITERS",
                                            kStallHookVariable,         kCrashInCheckpointVariable};

// The contract of a 2-rank job set in this process's environment, the optional variables
// cleared; everything is removed again at the end of the scope.
struct WorkerEnvironment {
  WorkerEnv contract;
  WorkerEnvironment() {
    contract.world_size = 2;
    contract.rank = 1;
    contract.token = "t";
    contract.store_port = 1234;
    contract.run_dir = "/runs/r";
    contract.config = "/runs/r/config.resolved.yaml";
    export_worker_env(contract);
    for (const char* name : kOptional) ::unsetenv(name);
  }
  ~WorkerEnvironment() {
    for (const auto& [name, value] : worker_env_vars(contract)) ::unsetenv(name.c_str());
    for (const char* name : kOptional) ::unsetenv(name);
  }
};

}  // namespace

TEST_CASE("worker environment: optional settings and test hooks default to off", "[launch]") {
  WorkerEnvironment env;
  const WorkerEnv e = read_worker_env();
  CHECK(e.resume.empty());
  CHECK(e.selftest_repeat == 1);
  CHECK_FALSE(e.selftest_quick);
  CHECK_FALSE(e.bench_min_bytes);
  CHECK_FALSE(e.bench_max_bytes);
  CHECK_FALSE(e.bench_iters);
  CHECK(e.hooks.stall.empty());
  CHECK(e.hooks.crash_in_checkpoint_step == -1);
}

TEST_CASE("worker environment: per-mode settings and test hooks are read once, typed", "[launch]") {
  WorkerEnvironment env;
  ::setenv("TRAINCTL_RESUME", "none", 1);
  ::setenv("TRAINCTL_SELFTEST_REPEAT", "0", 1);  // at least one round
  ::setenv("TRAINCTL_SELFTEST_QUICK", "1", 1);
  ::setenv("TRAINCTL_BENCH_MIN_BYTES", "64", 1);
  ::setenv("TRAINCTL_BENCH_MAX_BYTES", "4096", 1);
  ::setenv("TRAINCTL_BENCH_ITERS", "7", 1);
  ::setenv(kStallHookVariable, "rank=1,group=dp,op=allreduce,seconds=5", 1);
  ::setenv(kCrashInCheckpointVariable, "8", 1);
  const WorkerEnv e = read_worker_env();
  CHECK(e.rank == 1);
  CHECK(e.resume == "none");
  CHECK(e.selftest_repeat == 1);
  CHECK(e.selftest_quick);
  CHECK(e.bench_min_bytes == 64);
  CHECK(e.bench_max_bytes == 4096);
  CHECK(e.bench_iters == 7);
  CHECK(e.hooks.stall == "rank=1,group=dp,op=allreduce,seconds=5");
  CHECK(e.hooks.crash_in_checkpoint_step == 8);

  ::setenv("TRAINCTL_SELFTEST_REPEAT", "3", 1);
  CHECK(read_worker_env().selftest_repeat == 3);
  ::setenv("TRAINCTL_BENCH_ITERS", "-2", 1);
  CHECK_THROWS_WITH(read_worker_env(),
                    Catch::Contains("TRAINCTL_BENCH_ITERS='-2' is not a non-negative integer"));
}
