#include <catch2/catch.hpp>

#include <dirent.h>
#include <gloo/rendezvous/hash_store.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "comm/gloo/gloo_communicator.h"
#include "comm/gloo/gloo_groups.h"
#include "comm/self_test.h"
#include "comm/shm/shm_group.h"
#include "test_comm_support.h"
#include "util/error.h"

namespace comm = trainctl::comm;
using comm::ReduceOp;
using comm::shm::ShmGroup;
using comm::shm::ShmOptions;
using comm::testing::run_ranks;
using Clock = std::chrono::steady_clock;

namespace {

// Rank r's input: distinct, non-integer values so a wrong share or a wrong chunk shows.
std::vector<float> input(int rank, size_t n, size_t call) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    v[i] = 0.37f * static_cast<float>((i * 7 + call * 13) % 101) - 1.9f * static_cast<float>(rank);
  }
  return v;
}

// What every rank must hold: the reduction in rank order, the order ShmGroup uses.
std::vector<float> expected(int ranks, size_t n, size_t call, ReduceOp op) {
  std::vector<float> acc = input(0, n, call);
  for (int r = 1; r < ranks; ++r) {
    const std::vector<float> x = input(r, n, call);
    for (size_t i = 0; i < n; ++i) {
      acc[i] = op == ReduceOp::sum ? acc[i] + x[i] : (acc[i] < x[i] ? x[i] : acc[i]);
    }
  }
  return acc;
}

// Shared-memory names this process created and left behind in /dev/shm.
int leftover_segments() {
  const std::string mine = "trainctl-" + std::to_string(::getpid()) + "-";
  int n = 0;
  if (DIR* d = ::opendir("/dev/shm")) {
    while (dirent* e = ::readdir(d)) n += std::strncmp(e->d_name, mine.c_str(), mine.size()) == 0;
    ::closedir(d);
  }
  return n;
}

}  // namespace

TEST_CASE("shared-memory allreduce is exact and bitwise equal on every rank", "[comm][shm]") {
  for (int p = 2; p <= 4; ++p) {
    DYNAMIC_SECTION(p << " ranks") {
      gloo::rendezvous::HashStore store;
      ShmOptions options;
      options.slot_bytes = 64 * sizeof(float);  // 64-float chunks: most sizes span several
      // Sizes around the chunk and share boundaries, then the same buffers again: the
      // slots alternate and the chunk counters carry on across calls.
      const std::vector<size_t> sizes = {0, 1, 3, 63, 64, 65, 128, 1001, 1, 64 * 7 + 5};
      std::vector<std::vector<std::vector<float>>> got(static_cast<size_t>(p));
      run_ranks(p, [&](int rank) {
        std::string why;
        auto shm = ShmGroup::connect(store, rank, p, options, &why);
        if (!shm) throw std::runtime_error("no shared memory: " + why);
        for (size_t call = 0; call < sizes.size(); ++call) {
          std::vector<float> v = input(rank, sizes[call], call);
          shm->allreduce(v.data(), v.size(), call % 3 == 2 ? ReduceOp::max : ReduceOp::sum);
          got[static_cast<size_t>(rank)].push_back(std::move(v));
        }
      });
      for (size_t call = 0; call < sizes.size(); ++call) {
        INFO("call " << call << ", " << sizes[call] << " floats");
        const auto want =
            expected(p, sizes[call], call, call % 3 == 2 ? ReduceOp::max : ReduceOp::sum);
        for (int r = 0; r < p; ++r) CHECK(got[static_cast<size_t>(r)][call] == want);
      }
      CHECK(leftover_segments() == 0);  // names are unlinked once every peer has mapped them
    }
  }
}

TEST_CASE("shared-memory reduce_scatter and allgather match their definitions", "[comm][shm]") {
  for (int p = 2; p <= 4; ++p) {
    DYNAMIC_SECTION(p << " ranks") {
      gloo::rendezvous::HashStore store;
      ShmOptions options;
      options.slot_bytes = 64 * sizeof(float);  // reduce_scatter: 64 / p floats per block
      const auto pu = static_cast<size_t>(p);
      const std::vector<size_t> sizes = {0, 1, 7, 16, 33, 200, 3};
      std::vector<std::vector<std::vector<float>>> scattered(pu), gathered(pu);
      run_ranks(p, [&](int rank) {
        auto shm = ShmGroup::connect(store, rank, p, options, nullptr);
        if (!shm) throw std::runtime_error("no shared memory");
        for (size_t call = 0; call < sizes.size(); ++call) {
          const size_t n = sizes[call];
          const std::vector<float> in = input(rank, n * pu, call);
          std::vector<float> out(n, -7.0f);
          shm->reduce_scatter(in.data(), out.data(), n);
          scattered[static_cast<size_t>(rank)].push_back(out);
          // In place, as ZeRO gathers parameters: this rank's block already sits in `all`.
          std::vector<float> all(n * pu, -7.0f);
          std::copy(in.begin(), in.begin() + static_cast<long>(n),
                    all.begin() + static_cast<long>(static_cast<size_t>(rank) * n));
          shm->allgather(all.data() + static_cast<size_t>(rank) * n, all.data(), n);
          gathered[static_cast<size_t>(rank)].push_back(all);
        }
      });
      for (size_t call = 0; call < sizes.size(); ++call) {
        const size_t n = sizes[call];
        INFO("call " << call << ", blocks of " << n << " floats");
        const std::vector<float> sum = expected(p, n * pu, call, ReduceOp::sum);
        std::vector<float> all;
        for (int q = 0; q < p; ++q) {
          const std::vector<float> in = input(q, n * pu, call);
          all.insert(all.end(), in.begin(), in.begin() + static_cast<long>(n));
        }
        for (size_t r = 0; r < pu; ++r) {
          CHECK(scattered[r][call] ==
                std::vector<float>(sum.begin() + static_cast<long>(r * n),
                                   sum.begin() + static_cast<long>((r + 1) * n)));
          CHECK(gathered[r][call] == all);
        }
      }
    }
  }
}

TEST_CASE("shared-memory allreduce fails fast when a peer leaves, and times out on a silent one",
          "[comm][shm]") {
  for (const bool peer_leaves : {true, false}) {
    DYNAMIC_SECTION((peer_leaves ? "peer leaves" : "peer stays silent")) {
      gloo::rendezvous::HashStore store;
      ShmOptions options;
      options.timeout = std::chrono::milliseconds(peer_leaves ? 60000 : 400);
      options.poll = std::chrono::milliseconds(20);
      std::string error;
      double seconds = 0;
      std::atomic<bool> survivor_done{false};
      run_ranks(2, [&](int rank) {
        auto shm = ShmGroup::connect(store, rank, 2, options, nullptr);
        if (!shm) throw std::runtime_error("no shared memory");
        if (rank == 1) {
          if (peer_leaves) {
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
            shm.reset();  // leaves without joining the call
          } else {
            while (!survivor_done) std::this_thread::sleep_for(std::chrono::milliseconds(5));
          }
          return;
        }
        std::vector<float> v(1000, 1.0f);
        const auto t0 = Clock::now();
        try {
          shm->allreduce(v.data(), v.size(), ReduceOp::sum);
        } catch (const std::runtime_error& e) {
          error = e.what();
        }
        seconds = std::chrono::duration<double>(Clock::now() - t0).count();
        survivor_done = true;
      });
      INFO(error);
      CHECK(error.find("rank 1 (pid ") != std::string::npos);
      if (peer_leaves) {
        CHECK(error.find("left the group") != std::string::npos);
        CHECK(seconds < 5.0);  // noticed within a poll, not after the 60 s timeout
      } else {
        CHECK(error.find("timed out after 400 ms") != std::string::npos);
        CHECK(seconds >= 0.4);
        CHECK(seconds < 10.0);
      }
    }
  }
}

TEST_CASE("ranks on different hosts get no shared memory, and every rank agrees", "[comm][shm]") {
  gloo::rendezvous::HashStore store;
  // Rank 1 announces another host; rank 0 must decline without creating anything.
  const std::string elsewhere = "other-host|boot|ipc|mnt|pid";
  store.set("host/1", std::vector<char>(elsewhere.begin(), elsewhere.end()));
  std::string why;
  auto shm = ShmGroup::connect(store, 0, 2, ShmOptions{}, &why);
  CHECK(shm == nullptr);
  CHECK(why == "rank 1 runs on another host than rank 0");
  CHECK(leftover_segments() == 0);
}

TEST_CASE("process groups on one host allreduce through shared memory unless told otherwise",
          "[comm][shm]") {
  for (const bool shared : {true, false}) {
    DYNAMIC_SECTION((shared ? "default" : "shared_memory off")) {
      auto store = std::make_shared<gloo::rendezvous::HashStore>();
      comm::GlooOptions options;
      options.timeout = std::chrono::seconds(30);
      options.shared_memory = shared;
      options.shm_slot_bytes = 4096;
      std::vector<std::string> algos(2);
      run_ranks(2, [&](int rank) {
        auto groups = comm::make_gloo_groups(store, comm::Layout{2, 1, 1}, rank, options);
        comm::SelfTestOptions sizes;
        sizes.counts = {1, 7, 1001, 65537};
        comm::run_collective_self_test(groups, sizes);
        algos[static_cast<size_t>(rank)] = groups.dp->algorithm_name("allreduce", 1 << 20);
      });
      CHECK(algos[0] == (shared ? "shm" : "ring"));
      CHECK(algos[1] == algos[0]);
    }
  }
}

TEST_CASE("allreduce_algo shm without shared memory is refused with the reason", "[comm][shm]") {
  comm::GlooOptions options;
  options.allreduce_algo = comm::AllreduceAlgo::shm;
  gloo::rendezvous::HashStore store;
  run_ranks(2, [&](int rank) {
    auto context = comm::testing::connect_world(store, rank, 2);
    try {
      comm::GlooCommunicator c(context, "dp[0]", options);
      throw std::runtime_error("constructed without shared memory");
    } catch (const std::invalid_argument& e) {
      if (std::string(e.what()).find("allreduce_algo shm needs") == std::string::npos) throw;
    }
    comm::GlooCommunicator plain(context, "dp[0]");
    plain.barrier();  // both ranks connected before either closes
  });
  CHECK(comm::parse_allreduce_algo("shm") == comm::AllreduceAlgo::shm);
}
