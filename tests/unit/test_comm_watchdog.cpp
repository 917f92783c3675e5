// The hang watchdog's parts: the progress board, the recording communicator decorator,
// the stall test hook, the timeout report, and the watchdog thread over real Gloo ranks.
#include <catch2/catch.hpp>

#include <gloo/rendezvous/hash_store.h>
#include <gloo/rendezvous/prefix_store.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "comm/gloo/gloo_communicator.h"
#include "comm/progress.h"
#include "comm/watched_communicator.h"
#include "launch/prefixed_store.h"
#include "launch/tcp_store_client.h"
#include "launch/tcp_store_server.h"
#include "launch/watchdog.h"
#include "test_comm_support.h"

namespace comm = trainctl::comm;
namespace launch = trainctl::launch;
using comm::testing::run_ranks;
using namespace std::chrono_literals;

namespace {

// A world group of `n` ranks over `store`, wrapped for the board of `rank`.
std::unique_ptr<comm::WatchedCommunicator> watched_world(
    gloo::rendezvous::Store& store, int rank, int n, std::shared_ptr<comm::ProgressBoard> board,
    std::optional<comm::StallHook> stall = std::nullopt) {
  comm::GlooOptions options;
  options.timeout = 20s;
  auto inner = std::make_unique<comm::GlooCommunicator>(
      comm::testing::connect_world(store, rank, n), "world", options);
  std::vector<int> members;
  for (int r = 0; r < n; ++r) members.push_back(r);
  return std::make_unique<comm::WatchedCommunicator>(std::move(inner), std::move(board), members,
                                                     std::move(stall));
}

comm::CallRecord call(std::string op, int64_t seq, size_t bytes, double seconds, int peer = -1) {
  return comm::CallRecord{std::move(op), seq, bytes, peer, seconds};
}

comm::ProgressSnapshot snapshot_of(int rank, int64_t step, std::vector<comm::GroupProgress> g) {
  comm::ProgressSnapshot s;
  s.rank = rank;
  s.step = step;
  s.groups = std::move(g);
  return s;
}

// A rank's own connection to `server`, under the watchdog's key prefix, as workers have
// (Gloo's HashStore keys are write-once; the rendezvous store's are write-many).
std::shared_ptr<gloo::rendezvous::Store> watchdog_store(const launch::TcpStoreServer& server) {
  auto client = std::make_shared<launch::TcpStoreClient>("127.0.0.1", server.port(), "t");
  return std::make_shared<launch::PrefixedStore>(client, "watchdog/");
}

}  // namespace

TEST_CASE("the progress board numbers calls per group and describes the one in flight",
          "[comm][watchdog]") {
  comm::ProgressBoard board(3);
  const int dp = board.add_group("dp[1]", {1, 3});
  const int pp = board.add_group("pp[0]", {3, 7});
  CHECK(board.snapshot().describe() == "no communicator call yet");

  CHECK(board.begin_collective(dp, "allreduce", 4096) == 1);
  board.end(dp);
  CHECK(board.begin_collective(dp, "allgather", 64) == 2);
  board.end(dp);
  CHECK(board.begin_p2p(pp, "send", 100, 1) == 1);
  board.end(pp);
  board.set_step(12);
  board.set_phase("backward");
  CHECK_THAT(board.snapshot().describe(),
             Catch::StartsWith("step 12 (backward): idle for ") &&
                 Catch::EndsWith(" since send #1 to group rank 1 on pp[0] (100 B)"));

  CHECK(board.begin_collective(dp, "allreduce", 4096) == 3);
  std::this_thread::sleep_for(20ms);
  comm::ProgressSnapshot s = board.snapshot();
  CHECK(s.rank == 3);
  CHECK(s.step == 12);
  REQUIRE(s.longest_in_flight() == s.group("dp[1]"));
  CHECK(s.group("dp[1]")->in_flight->seconds >= 0.02);
  CHECK(s.group("dp[1]")->collectives == 3);
  CHECK(s.group("pp[0]")->p2p == 1);
  CHECK(s.group("pp[0]")->members == std::vector<int>{3, 7});
  CHECK_THAT(s.describe(), Catch::StartsWith("step 12 (backward): allreduce #3 on dp[1] (4096 B), "
                                             "waiting 0."));
  board.end(dp);
  CHECK(board.snapshot().longest_in_flight() == nullptr);
  CHECK(board.snapshot().group("dp[1]")->last_done->op == "allreduce");
  CHECK_THROWS_AS(board.add_group("has space", {0}), std::invalid_argument);
  CHECK_THROWS_AS(board.begin_collective(9, "barrier", 0), std::out_of_range);
}

TEST_CASE("a progress snapshot survives the store's text form and ages with time",
          "[comm][watchdog]") {
  comm::ProgressSnapshot s = snapshot_of(
      2, 40,
      {comm::GroupProgress{"world", {0, 1, 2}, 17, 0, call("barrier", 17, 0, 1.5), std::nullopt},
       comm::GroupProgress{"pp[1]", {2, 5}, 0, 9, std::nullopt, call("recv", 9, 2048, 0.25, 1)}});
  s.phase = "forward pass";
  s.taken_at_ms = 1'000'000;
  comm::ProgressSnapshot back = comm::ProgressSnapshot::decode(s.encode());
  CHECK(back.encode() == s.encode());
  CHECK(back.describe() == s.describe());
  CHECK(back.phase == "forward pass");
  REQUIRE(back.group("pp[1]") != nullptr);
  CHECK(back.group("pp[1]")->last_done->peer == 1);
  CHECK(back.group("pp[1]")->members == std::vector<int>{2, 5});

  comm::ProgressSnapshot later = back.aged_to(1'002'000);
  CHECK(later.group("world")->in_flight->seconds == Approx(3.5));
  CHECK(later.group("pp[1]")->last_done->seconds == Approx(2.25));
  CHECK(later.describe() == "step 40 (forward pass): barrier #17 on world (0 B), waiting 3.5 s");

  CHECK_THROWS_AS(comm::ProgressSnapshot::decode("hello"), std::invalid_argument);
  CHECK_THROWS_AS(comm::ProgressSnapshot::decode("progress 1\nrank x\n"), std::invalid_argument);
  CHECK_THROWS_AS(comm::ProgressSnapshot::decode("progress 1\nrank 0\ncall in a 1 2 -1 0\n"),
                  std::invalid_argument);
}

TEST_CASE("the stall hook parses its spec and applies to one rank and group", "[comm][watchdog]") {
  auto hook = comm::parse_stall_hook("rank=1,group=dp,op=allreduce,call=5,seconds=2.5", 1);
  REQUIRE(hook);
  CHECK(hook->group == "dp");
  CHECK(hook->op == "allreduce");
  CHECK(hook->call == 5);
  CHECK(hook->duration == 2500ms);
  CHECK(hook->matches_group("dp[3]"));
  CHECK(hook->matches_group("dp"));
  CHECK_FALSE(hook->matches_group("dpx[0]"));
  CHECK_FALSE(hook->matches_group("tp[0]"));
  CHECK_FALSE(comm::parse_stall_hook("rank=1,group=dp,op=allreduce,seconds=1", 0));
  CHECK(comm::parse_stall_hook("rank=0,group=world,op=barrier,seconds=1", 0)->call == 1);
  CHECK_THROWS_WITH(comm::parse_stall_hook("rank=1,group=dp,op=allreduce,colour=red", 1),
                    Catch::Contains("unknown key 'colour'"));
  CHECK_THROWS_WITH(comm::parse_stall_hook("rank=1,group=dp,op=allreduce", 1),
                    Catch::Contains("seconds="));
  CHECK_THROWS_WITH(comm::parse_stall_hook("rank=one,group=dp,op=allreduce,seconds=1", 1),
                    Catch::Contains("rank='one'"));
}

TEST_CASE("a watched communicator forwards every call and records it on the board",
          "[comm][watchdog]") {
  auto store = std::make_shared<gloo::rendezvous::HashStore>();
  std::vector<comm::ProgressSnapshot> seen(2);
  run_ranks(2, [&](int rank) {
    auto board = std::make_shared<comm::ProgressBoard>(rank);
    auto c = watched_world(*store, rank, 2, board);
    std::vector<float> v = {1.0f + static_cast<float>(rank), 2.0f};
    c->allreduce(v.data(), v.size());
    if (v[0] != 3.0f || v[1] != 4.0f) throw std::runtime_error("allreduce result wrong");
    std::vector<float> all(4);
    c->allgather(v.data(), all.data(), 2);
    float b = rank == 0 ? 7.0f : 0.0f;
    c->broadcast(&b, 1, 0);
    if (b != 7.0f) throw std::runtime_error("broadcast result wrong");
    std::vector<float> out(1);
    std::vector<float> in = {1.0f, 2.0f};
    c->reduce_scatter(in.data(), out.data(), 1);
    int payload = 10 + rank;
    int got = 0;
    if (rank == 0) {
      c->send(&payload, sizeof payload, 1, 5);
      c->isend(&payload, sizeof payload, 1, 6)->wait();
    } else {
      c->recv(&got, sizeof got, 0, 5);
      c->recv(&got, sizeof got, 0, 6);
      if (got != 10) throw std::runtime_error("recv result wrong");
    }
    c->barrier();
    if (c->algorithm_name("allreduce", 4) != c->inner().algorithm_name("allreduce", 4)) {
      throw std::runtime_error("algorithm_name not forwarded");
    }
    seen[static_cast<size_t>(rank)] = board->snapshot();
  });
  for (int rank = 0; rank < 2; ++rank) {
    const comm::GroupProgress* g = seen[static_cast<size_t>(rank)].group("world");
    REQUIRE(g != nullptr);
    CHECK(g->collectives == 5);  // allreduce, allgather, broadcast, reduce_scatter, barrier
    CHECK(g->p2p == 2);
    CHECK_FALSE(g->in_flight);
    REQUIRE(g->last_done);
    CHECK(g->last_done->op == "barrier");
    CHECK(g->last_done->seq == 5);
  }
}

TEST_CASE("the timeout report names the call and which ranks reached it", "[comm][watchdog]") {
  const std::vector<int> dp = {0, 1, 2, 3};
  auto dp_at = [&](int64_t entered, std::optional<comm::CallRecord> in,
                   std::optional<comm::CallRecord> done) {
    return comm::GroupProgress{"dp[0]", dp, entered, 0, std::move(in), std::move(done)};
  };
  comm::ProgressSnapshot self =
      snapshot_of(0, 12, {dp_at(431, call("allreduce", 431, 4096, 31.2), std::nullopt)});
  std::vector<std::optional<comm::ProgressSnapshot>> by_rank(5);
  by_rank[1] = snapshot_of(1, 12, {dp_at(430, std::nullopt, call("allreduce", 430, 4096, 31.0))});
  by_rank[2] = snapshot_of(2, 12, {dp_at(431, call("allreduce", 431, 4096, 31.1), std::nullopt)});
  by_rank[3] = snapshot_of(3, 12, {dp_at(431, call("allreduce", 431, 4096, 30.9), std::nullopt)});
  by_rank[4] = snapshot_of(4, 12, {});
  std::string report = launch::timeout_report(self, by_rank, 30s);
  CHECK_THAT(report, Catch::StartsWith("collective timed out after 30 s: allreduce #431 on dp[0] "
                                       "(4096 B) at step 12 (rank 0 waited 31.2 s)."));
  CHECK_THAT(report,
             Catch::Contains("Reached it: ranks 0, 2, 3. Not reached: rank 1 (step 12: idle for "
                             "31.0 s since allreduce #430 on dp[0] (4096 B))."));
  CHECK_THAT(report, Catch::Contains("Ranks outside dp[0]:\n  rank 4: step 12: no communicator"));

  SECTION("a rank whose heartbeat stopped is marked stale and named as the likely cause") {
    std::vector<std::chrono::milliseconds> silent(5, 400ms);
    silent[1] = 5000ms;  // SIGSTOPped: its last report is 5 s old
    const std::string stale = launch::timeout_report(self, by_rank, 30s, silent, 2000ms);
    CHECK_THAT(stale, Catch::Contains("Not reached: rank 1 (STALE: no heartbeat for 5 s: the "
                                      "process is stopped (SIGSTOP, a debugger), frozen"));
    CHECK_THAT(stale, Catch::Contains("last known position: step 12: idle for 31.0 s"));
    CHECK_THAT(stale, Catch::Contains("Likely cause: rank 1, which stopped reporting."));
    // Live ranks (recent heartbeats) are described as before, and no cause is guessed.
    silent[1] = 400ms;
    const std::string live = launch::timeout_report(self, by_rank, 30s, silent, 2000ms);
    CHECK_THAT(live, !Catch::Contains("STALE") && !Catch::Contains("Likely cause"));
  }
  SECTION("a rank without a report is not reached") {
    by_rank[2].reset();
    CHECK_THAT(launch::timeout_report(self, by_rank, 30s),
               Catch::Contains("Reached it: ranks 0, 3. Not reached: rank 1 (") &&
                   Catch::Contains("; rank 2 (no progress report"));
  }
  SECTION("when every rank is inside the call the report says so") {
    by_rank[1] = by_rank[3];
    CHECK_THAT(launch::timeout_report(self, by_rank, 30s),
               Catch::Contains("Reached it: ranks 0, 1, 2, 3. Not reached: none; every rank of "
                               "dp[0] is inside the call"));
  }
  SECTION("a point-to-point call names its peer") {
    comm::ProgressSnapshot recv = snapshot_of(
        0, -1,
        {comm::GroupProgress{"pp[0]", {0, 2}, 0, 3, call("recv", 3, 1024, 5.0, 1), std::nullopt}});
    std::vector<std::optional<comm::ProgressSnapshot>> ranks(3);
    ranks[2] = snapshot_of(2, -1, {});
    std::string text = launch::timeout_report(recv, ranks, 5s);
    CHECK_THAT(text,
               Catch::StartsWith("point-to-point call timed out after 5 s: recv #3 from group "
                                 "rank 1 on pp[0] (1024 B) (rank 0 waited 5 s)."));
    CHECK_THAT(text, Catch::Contains("Its peer, rank 2: no communicator call yet."));
    CHECK_THAT(text, Catch::Contains("rank 1: no progress report"));
  }
}

TEST_CASE("the watchdog reports a rank that stalls before a collective", "[comm][watchdog]") {
  constexpr int kRanks = 3;
  auto store = std::make_shared<gloo::rendezvous::HashStore>();
  launch::TcpStoreServer server("t", 0, "127.0.0.1");
  // Ends rank 1's stall once both waiting peers have fired: released after the first one
  // alone, the collective could complete before the other's watchdog looked (a flake
  // seen under load in CI).
  std::atomic<bool> release{false};
  int reported = 0;
  std::mutex mu;
  std::vector<std::string> reports(kRanks);
  std::vector<bool> fired(kRanks);
  run_ranks(kRanks, [&](int rank) {
    auto board = std::make_shared<comm::ProgressBoard>(rank);
    board->set_step(7);
    std::optional<comm::StallHook> stall;
    if (rank == 1) {
      stall = comm::parse_stall_hook("rank=1,group=world,op=allreduce,call=2,seconds=30", 1);
      stall->interrupted = [&] { return release.load(); };
    }
    auto c = watched_world(*store, rank, kRanks, board, stall);
    launch::WatchdogOptions options;
    options.timeout = 600ms;
    options.period = 50ms;
    options.gather_timeout = 1s;
    options.world_size = kRanks;
    launch::Watchdog watchdog(board, watchdog_store(server), options,
                              [&, rank](const std::string& report) {
                                std::lock_guard lock(mu);
                                reports[static_cast<size_t>(rank)] = report;
                                if (++reported == kRanks - 1) release = true;
                              });
    std::vector<float> v(16, 1.0f);
    c->allreduce(v.data(), v.size());
    std::this_thread::sleep_for(200ms);  // every rank publishes its idle state
    c->allreduce(v.data(), v.size());
    c->barrier();
    std::lock_guard lock(mu);
    fired[static_cast<size_t>(rank)] = watchdog.fired();
  });
  CHECK_FALSE(fired[1]);
  for (int rank : {0, 2}) {
    INFO("rank " << rank << ": " << reports[static_cast<size_t>(rank)]);
    CHECK(fired[static_cast<size_t>(rank)]);
    CHECK_THAT(
        reports[static_cast<size_t>(rank)],
        Catch::StartsWith("collective timed out after 0.6 s: allreduce #2 on world (64 B) "
                          "at step 7") &&
            Catch::Contains("Reached it: ranks 0, 2. Not reached: rank 1 (step 7: idle for") &&
            Catch::Contains("since allreduce #1 on world (64 B))."));
  }
}

TEST_CASE("the watchdog publishes progress and stays quiet while calls complete",
          "[comm][watchdog]") {
  auto store = std::make_shared<gloo::rendezvous::HashStore>();
  launch::TcpStoreServer server("t", 0, "127.0.0.1");
  std::vector<bool> fired(2);
  run_ranks(2, [&](int rank) {
    auto board = std::make_shared<comm::ProgressBoard>(rank);
    auto c = watched_world(*store, rank, 2, board);
    launch::WatchdogOptions options;
    options.timeout = 300ms;
    options.period = 20ms;
    options.world_size = 2;
    launch::Watchdog watchdog(board, watchdog_store(server), options, [](const std::string&) {});
    std::vector<float> v(1000, 1.0f);
    for (int i = 0; i < 50; ++i) c->allreduce(v.data(), v.size());
    std::this_thread::sleep_for(400ms);  // idle time is not a stuck call
    c->barrier();
    fired[static_cast<size_t>(rank)] = watchdog.fired();
  });
  CHECK_FALSE(fired[0]);
  CHECK_FALSE(fired[1]);
  auto reader = watchdog_store(server);
  for (int rank = 0; rank < 2; ++rank) {
    std::vector<char> text = reader->get(launch::watchdog_key(rank));
    comm::ProgressSnapshot s =
        comm::ProgressSnapshot::decode(std::string(text.begin(), text.end()));
    CHECK(s.rank == rank);
    REQUIRE(s.group("world") != nullptr);
    CHECK(s.group("world")->collectives >= 50);
  }
}
