#include <catch2/catch.hpp>

#include <gloo/rendezvous/hash_store.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "comm/gloo/gloo_communicator.h"
#include "test_comm_support.h"

namespace comm = trainctl::comm;
using comm::testing::connect_world;
using comm::testing::run_ranks;
using Clock = std::chrono::steady_clock;

namespace {

struct Outcome {
  std::string error;  // CommError message, empty if none was thrown
  double seconds = 0;
};

enum class Peer {
  left_before,    // closed its connections before the survivor's call
  leaves_during,  // closes them while the survivor waits inside the call
  stays_silent,   // stays connected and never makes the call
};

// Rank 0 calls `op` on a group named "dp[1]" whose rank 1 connected and then behaves
// as `peer` says. Returns what rank 0 saw.
template <class Op>
Outcome survivor_sees(Peer peer, Op op, std::chrono::milliseconds timeout) {
  gloo::rendezvous::HashStore store;
  std::atomic<bool> peer_done{false};
  std::atomic<bool> survivor_done{false};
  Outcome outcome;
  run_ranks(2, [&](int rank) {
    comm::GlooOptions options;
    options.timeout = timeout;
    // Both ranks finish connecting (the barrier) before rank 1 goes away: a peer lost
    // during rendezvous is make_gloo_groups' RendezvousError, not this test's subject.
    auto context = connect_world(store, rank, 2);
    if (rank == 1) {
      {
        comm::GlooCommunicator gone(std::move(context), "dp[1]", options);
        gone.barrier();
        if (peer == Peer::stays_silent) {
          while (!survivor_done) std::this_thread::sleep_for(std::chrono::milliseconds(5));
        } else if (peer == Peer::leaves_during) {
          std::this_thread::sleep_for(std::chrono::milliseconds(300));
        }
      }  // the context and its connections close here
      peer_done = true;
      return;
    }
    comm::GlooCommunicator survivor(std::move(context), "dp[1]", options);
    survivor.barrier();
    if (peer == Peer::left_before) {
      while (!peer_done) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    const auto start = Clock::now();
    try {
      op(survivor);
    } catch (const comm::CommError& e) {
      outcome.error = e.what();
    }
    outcome.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    survivor_done = true;
  });
  return outcome;
}

}  // namespace

TEST_CASE("a peer that closed its connections makes every op fail with CommError", "[comm]") {
  const auto timeout = std::chrono::seconds(20);
  std::vector<float> data(1000, 1.0f), out(2000);
  SECTION("allreduce") {
    auto o = survivor_sees(
        Peer::left_before, [&](comm::GlooCommunicator& c) { c.allreduce(data.data(), 1000); },
        timeout);
    CHECK_THAT(o.error, Catch::StartsWith("allreduce on group dp[1] failed: "));
    CHECK(o.seconds < 10.0);  // noticed from the closed socket, not the timeout
  }
  SECTION("allgather") {
    auto o = survivor_sees(
        Peer::left_before,
        [&](comm::GlooCommunicator& c) { c.allgather(data.data(), out.data(), 1000); }, timeout);
    CHECK_THAT(o.error, Catch::StartsWith("allgather on group dp[1] failed: "));
    CHECK(o.seconds < 10.0);
  }
  SECTION("recv") {
    auto o = survivor_sees(
        Peer::left_before, [&](comm::GlooCommunicator& c) { c.recv(data.data(), 4000, 1, 3); },
        timeout);
    CHECK_THAT(o.error, Catch::StartsWith("recv from rank 1 on group dp[1] failed: "));
    CHECK(o.seconds < 10.0);
  }
}

TEST_CASE("a peer that exits while others wait in a collective is reported quickly", "[comm]") {
  std::vector<float> data(1 << 16, 1.0f);
  auto o = survivor_sees(
      Peer::leaves_during,
      [&](comm::GlooCommunicator& c) { c.allreduce(data.data(), data.size()); },
      std::chrono::seconds(20));
  CHECK_THAT(o.error, Catch::StartsWith("allreduce on group dp[1] failed: ") &&
                          Catch::Contains("rank 1") && Catch::Contains("closed"));
  CHECK(o.seconds < 10.0);
}

TEST_CASE("a silent peer makes the op fail with CommError after the timeout", "[comm]") {
  std::vector<float> data(16, 1.0f);
  auto o = survivor_sees(
      Peer::stays_silent, [&](comm::GlooCommunicator& c) { c.allreduce(data.data(), 16); },
      std::chrono::milliseconds(300));
  CHECK_THAT(o.error, Catch::StartsWith("allreduce on group dp[1] failed: "));
  CHECK(o.seconds >= 0.25);
  CHECK(o.seconds < 10.0);
}
