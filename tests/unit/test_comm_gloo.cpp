#include <catch2/catch.hpp>

#include <gloo/rendezvous/hash_store.h>

#include <chrono>
#include <string>
#include <vector>

#include "comm/gloo/gloo_communicator.h"
#include "comm/self_test.h"
#include "test_comm_support.h"

namespace comm = trainctl::comm;
using comm::AllreduceAlgo;
using comm::GlooCommunicator;
using comm::GlooOptions;
using comm::testing::connect_world;
using comm::testing::run_ranks;

namespace {

using PerRank = std::vector<std::vector<float>>;

// Runs `body(comm)` on n ranks connected over a fresh HashStore; returns what each rank
// put in its result vector.
template <class Body>
PerRank on_world(int n, Body body, GlooOptions options = {}) {
  gloo::rendezvous::HashStore store;
  PerRank results(static_cast<size_t>(n));
  run_ranks(n, [&](int rank) {
    GlooCommunicator comm(connect_world(store, rank, n), "world", options);
    body(comm, results[static_cast<size_t>(rank)]);
    // No rank closes its connections while another may still be connecting or reading.
    comm.barrier();
  });
  return results;
}

}  // namespace

TEST_CASE("GlooCommunicator collectives give exact values at world sizes 1-4", "[comm]") {
  for (int n = 1; n <= 4; ++n) {
    DYNAMIC_SECTION("world size " << n) {
      const size_t count = 5;
      SECTION("allreduce sum and max") {
        auto got = on_world(n, [&](GlooCommunicator& c, std::vector<float>& out) {
          std::vector<float> sum(count), max(count);
          for (size_t i = 0; i < count; ++i) {
            sum[i] = static_cast<float>(c.rank() + 1) * static_cast<float>(i + 1);
            max[i] = static_cast<float>((c.rank() * 3 + static_cast<int>(i)) % n);
          }
          c.allreduce(sum.data(), count, comm::ReduceOp::sum);
          c.allreduce(max.data(), count, comm::ReduceOp::max);
          out = sum;
          out.insert(out.end(), max.begin(), max.end());
        });
        const float ranks_sum = static_cast<float>(n * (n + 1) / 2);
        for (const auto& out : got) {
          for (size_t i = 0; i < count; ++i) {
            CHECK(out[i] == ranks_sum * static_cast<float>(i + 1));
            // (3r + i) mod n over all r reaches n-1 when gcd(3, n) = 1, else the largest
            // value congruent to i mod 3 below n.
            float want = 0;
            for (int r = 0; r < n; ++r) {
              want = std::max(want, static_cast<float>((r * 3 + static_cast<int>(i)) % n));
            }
            CHECK(out[count + i] == want);
          }
        }
      }
      SECTION("reduce_scatter: rank r gets the sum of block r") {
        auto got = on_world(n, [&](GlooCommunicator& c, std::vector<float>& out) {
          std::vector<float> in(count * static_cast<size_t>(n));
          for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i) + 100.0f * c.rank();
          out.assign(count, -1.0f);
          c.reduce_scatter(in.data(), out.data(), count);
        });
        for (int r = 0; r < n; ++r) {
          for (size_t j = 0; j < count; ++j) {
            const size_t i = static_cast<size_t>(r) * count + j;
            // sum over ranks q of (i + 100 q)
            CHECK(got[static_cast<size_t>(r)][j] ==
                  static_cast<float>(n) * static_cast<float>(i) + 100.0f * (n * (n - 1) / 2));
          }
        }
      }
      SECTION("allgather: block r comes from rank r") {
        auto got = on_world(n, [&](GlooCommunicator& c, std::vector<float>& out) {
          std::vector<float> in(count);
          for (size_t j = 0; j < count; ++j) in[j] = 10.0f * c.rank() + static_cast<float>(j);
          out.assign(count * static_cast<size_t>(n), -1.0f);
          c.allgather(in.data(), out.data(), count);
        });
        for (const auto& out : got) {
          for (size_t i = 0; i < out.size(); ++i) {
            CHECK(out[i] == 10.0f * static_cast<float>(i / count) + static_cast<float>(i % count));
          }
        }
      }
      SECTION("broadcast from the last rank") {
        auto got = on_world(n, [&](GlooCommunicator& c, std::vector<float>& out) {
          out.assign(count, static_cast<float>(c.rank()));
          c.broadcast(out.data(), count, n - 1);
        });
        for (const auto& out : got)
          CHECK(out == std::vector<float>(count, static_cast<float>(n - 1)));
      }
      SECTION("send/recv between the first and last rank, then barrier") {
        auto got = on_world(n, [&](GlooCommunicator& c, std::vector<float>& out) {
          out.assign(count, -1.0f);
          if (n > 1 && c.rank() == 0) {
            std::vector<float> msg = {1, 2, 3, 4, 5};
            c.send(msg.data(), count * sizeof(float), n - 1, 7);
          } else if (n > 1 && c.rank() == n - 1) {
            c.recv(out.data(), count * sizeof(float), 0, 7);
          }
          c.barrier();
        });
        if (n > 1) CHECK(got.back() == std::vector<float>{1, 2, 3, 4, 5});
        CHECK(got.front() == std::vector<float>(count, -1.0f));
      }
    }
  }
}

TEST_CASE("every allreduce algorithm passes the self-test at world sizes 1-4", "[comm]") {
  for (auto algo :
       {AllreduceAlgo::automatic, AllreduceAlgo::direct, AllreduceAlgo::ring,
        AllreduceAlgo::gloo_ring, AllreduceAlgo::ring_chunked, AllreduceAlgo::halving_doubling}) {
    for (int n = 1; n <= 4; ++n) {
      DYNAMIC_SECTION(comm::to_string(algo) << " on " << n << " ranks") {
        GlooOptions options;
        options.allreduce_algo = algo;
        // Several segments per block at 16385 floats and up.
        options.gloo_ring_segment_bytes = 4096;
        options.ring_segment_bytes = 4096;
        options.ring_window = 2;  // receives re-posted as segments land
        comm::SelfTestOptions sizes;
        sizes.counts = {1, 2, 3, 7, 1001, 16385, 100003};
        on_world(
            n,
            [&](GlooCommunicator& c, std::vector<float>&) {
              comm::run_collective_self_test(c, sizes);
            },
            options);
        SUCCEED("self-test passed");
      }
    }
  }
}

TEST_CASE("automatic allreduce picks direct for small and ring for large messages", "[comm]") {
  gloo::rendezvous::HashStore store;
  run_ranks(2, [&](int rank) {
    GlooCommunicator c(connect_world(store, rank, 2), "world");
    c.barrier();  // both ranks connected before either closes
    if (c.allreduce_algo_for(16) != AllreduceAlgo::direct) throw std::runtime_error("16 floats");
    if (c.allreduce_algo_for(1 << 24) != AllreduceAlgo::ring) throw std::runtime_error("64 MiB");
    if (c.algorithm_name("allreduce", 16) != "direct") throw std::runtime_error("name");
  });
  CHECK(comm::parse_allreduce_algo("auto") == AllreduceAlgo::automatic);
  CHECK(comm::parse_allreduce_algo("ring_chunked") == AllreduceAlgo::ring_chunked);
  CHECK_THROWS_AS(comm::parse_allreduce_algo("bcube"), std::invalid_argument);
}

TEST_CASE("bad peers and roots are rejected before any communication", "[comm]") {
  gloo::rendezvous::HashStore store;
  GlooCommunicator c(connect_world(store, 0, 1), "tp[3]");
  float x = 0;
  CHECK_THROWS_AS(c.send(&x, sizeof x, 0, 0), std::invalid_argument);  // itself
  CHECK_THROWS_AS(c.recv(&x, sizeof x, 1, 0), std::invalid_argument);  // outside
  CHECK_THROWS_WITH(c.broadcast(&x, 1, 2), Catch::Contains("tp[3]"));
}

TEST_CASE("isend lets two ranks send to each other at once, tags pick the message", "[comm]") {
  gloo::rendezvous::HashStore store;
  run_ranks(2, [&](int rank) {
    comm::GlooCommunicator c(connect_world(store, rank, 2), "pp[0]");
    const int peer = 1 - rank;
    // Two messages per direction, received in the opposite order to the sends: a
    // blocking send would deadlock here (both ranks send first).
    std::vector<float> a(1000, static_cast<float>(10 * rank + 1));
    std::vector<float> b(3, static_cast<float>(10 * rank + 2));
    auto s1 = c.isend(a.data(), a.size() * sizeof(float), peer, 7);
    auto s2 = c.isend(b.data(), b.size() * sizeof(float), peer, 8);
    std::vector<float> got_b(3), got_a(1000);
    c.recv(got_b.data(), got_b.size() * sizeof(float), peer, 8);
    c.recv(got_a.data(), got_a.size() * sizeof(float), peer, 7);
    s1->wait();
    s2->wait();
    if (got_a != std::vector<float>(1000, static_cast<float>(10 * peer + 1)) ||
        got_b != std::vector<float>(3, static_cast<float>(10 * peer + 2))) {
      throw std::runtime_error("rank " + std::to_string(rank) + " received the wrong data");
    }
    c.barrier();
  });
}
