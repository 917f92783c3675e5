#include <catch2/catch.hpp>

#include <gloo/rendezvous/hash_store.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm/bench_comm.h"
#include "comm/gloo/gloo_communicator.h"
#include "test_comm_support.h"

namespace comm = trainctl::comm;
using comm::testing::connect_world;
using comm::testing::run_ranks;

TEST_CASE("bench_collectives is collective and reports nccl-tests quantities", "[comm]") {
  gloo::rendezvous::HashStore store;
  comm::BenchOptions options;
  options.min_bytes = 4;  // too small for 2 ranks' allgather: skipped
  options.max_bytes = 64 * 1024;
  options.factor = 16;
  options.warmup_iters = 1;
  options.iters = 3;
  std::vector<std::vector<comm::BenchRow>> rows(2);
  run_ranks(2, [&](int rank) {
    comm::GlooCommunicator c(connect_world(store, rank, 2), "world");
    rows[static_cast<size_t>(rank)] = comm::bench_collectives(c, options);
    c.barrier();
  });
  const auto& r0 = rows[0];
  // allreduce at 4, 64, 1 KiB, 16 KiB; allgather and reduce_scatter from 64 B on.
  INFO(comm::format_bench_table(r0));
  REQUIRE(r0.size() == 4 + 3 + 3);
  REQUIRE(rows[1].size() == r0.size());
  CHECK(r0[0].op == "allreduce");
  CHECK(r0[0].count == 1);
  CHECK(r0[0].algo == "direct");
  CHECK(r0[4].op == "allgather");
  CHECK(r0[4].bytes == 64);
  CHECK(r0[4].count == 8);  // per rank: 64 B output over 2 ranks
  for (size_t i = 0; i < r0.size(); ++i) {
    INFO(r0[i].op << " " << r0[i].bytes);
    CHECK(r0[i].time_us > 0);
    CHECK(r0[i].time_us == rows[1][i].time_us);  // the slowest rank's time, on every rank
    CHECK(r0[i].algbw_GBps == Approx(r0[i].bytes / (r0[i].time_us * 1e3)));
    const double factor = r0[i].op == "allreduce" ? 1.0 : 0.5;  // 2(n-1)/n, (n-1)/n at n=2
    CHECK(r0[i].busbw_GBps == Approx(r0[i].algbw_GBps * factor));
  }
  const std::string table = comm::format_bench_table(r0);
  CHECK_THAT(table, Catch::Contains("algbw") && Catch::Contains("busbw") &&
                        Catch::Contains("reduce_scatter") && Catch::Contains("(GB/s)"));
  CHECK(std::count(table.begin(), table.end(), '\n') == static_cast<long>(r0.size() + 2));
}

TEST_CASE("bench_collectives rejects unknown ops and empty size ranges", "[comm]") {
  gloo::rendezvous::HashStore store;
  comm::GlooCommunicator c(connect_world(store, 0, 1), "world");
  comm::BenchOptions bad_op;
  bad_op.ops = {"alltoall"};
  CHECK_THROWS_WITH(comm::bench_collectives(c, bad_op), Catch::Contains("alltoall"));
  comm::BenchOptions bad_range;
  bad_range.min_bytes = 1024;
  bad_range.max_bytes = 512;
  CHECK_THROWS_AS(comm::bench_collectives(c, bad_range), std::invalid_argument);
}
