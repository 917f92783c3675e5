// Watching the launchers' heartbeats over time (launch/node_heartbeat.h: watch and
// silent_for), with sample times given by the test: a node is silent only when its counter
// stood still between two samples `limit` apart, so a stall of the watcher alone (a loaded
// machine) never names a live node (issue 36).
#include <catch2/catch.hpp>

#include <memory>
#include <vector>

#include "launch/node_heartbeat.h"
#include "launch/tcp_store_client.h"
#include "launch/tcp_store_server.h"

using namespace trainctl::launch;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

// Node `node`'s launcher beats once (a fresh object: beat() is rate-limited per object).
void beat(TcpStoreClient& store, int node) { NodeHeartbeats(store, "beat/", node, 3).beat(); }

}  // namespace

TEST_CASE("a node is silent once its counter stood still for the limit between samples",
          "[launch]") {
  TcpStoreServer server("tok", 0, "127.0.0.1");
  TcpStoreClient store0("127.0.0.1", server.port(), "tok");
  TcpStoreClient store1("127.0.0.1", server.port(), "tok");
  NodeHeartbeats watcher(store0, "beat/", 0, 3);
  const auto t0 = Clock::now();
  beat(store1, 1);
  beat(store1, 2);
  watcher.watch(t0);
  CHECK(watcher.silent_for(5s).empty());
  beat(store1, 1);  // node 1 beats on, node 2 no more
  watcher.watch(t0 + 3s);
  CHECK(watcher.silent_for(5s).empty());  // node 2: still for 3 s only
  beat(store1, 1);
  watcher.watch(t0 + 6s);
  CHECK(watcher.silent_for(5s) == std::vector<int>{2});
  CHECK(watcher.silent_for(7s).empty());
  // Node 2 beats again: it is back.
  beat(store1, 2);
  watcher.watch(t0 + 7s);
  CHECK(watcher.silent_for(5s).empty());
}

TEST_CASE("a watcher that stalled itself does not find live nodes silent", "[launch]") {
  TcpStoreServer server("tok", 0, "127.0.0.1");
  TcpStoreClient store0("127.0.0.1", server.port(), "tok");
  TcpStoreClient store1("127.0.0.1", server.port(), "tok");
  NodeHeartbeats watcher(store0, "beat/", 0, 3);
  const auto t0 = Clock::now();
  beat(store1, 1);
  beat(store1, 2);
  watcher.watch(t0);
  // The watcher sleeps a minute (descheduled); the others beat meanwhile.
  beat(store1, 1);
  beat(store1, 2);
  watcher.watch(t0 + 60s);
  CHECK(watcher.silent_for(5s).empty());
}

TEST_CASE("a node that finished is never silent, one that never beat is", "[launch]") {
  TcpStoreServer server("tok", 0, "127.0.0.1");
  TcpStoreClient store0("127.0.0.1", server.port(), "tok");
  TcpStoreClient store1("127.0.0.1", server.port(), "tok");
  NodeHeartbeats watcher(store0, "beat/", 0, 3);
  NodeHeartbeats node1(store1, "beat/", 1, 3);
  node1.beat();
  node1.done();  // its workers succeeded: it beats no more, and that is no failure
  const auto t0 = Clock::now();
  watcher.watch(t0);
  watcher.watch(t0 + 10s);
  // Node 2 was killed before its first beat: its counter never moved.
  CHECK(watcher.silent_for(5s) == std::vector<int>{2});
}

TEST_CASE("without the store no node is silent (losing it is reported elsewhere)", "[launch]") {
  auto server = std::make_unique<TcpStoreServer>("tok", 0, "127.0.0.1");
  TcpStoreClient store0("127.0.0.1", server->port(), "tok");
  NodeHeartbeats watcher(store0, "beat/", 0, 2);
  const auto t0 = Clock::now();
  watcher.watch(t0);
  server.reset();
  watcher.watch(t0 + 10s);
  CHECK(watcher.silent_for(5s).empty());
}
