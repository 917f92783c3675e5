// The rendezvous store in one process: a server on a free port and clients on threads.
#include <sys/stat.h>
#include <unistd.h>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <thread>

#include "launch/job_token.h"
#include "launch/prefixed_store.h"
#include "launch/repeat_limiter.h"
#include "launch/tcp_store_client.h"
#include "launch/tcp_store_server.h"
#include "launch/worker_env.h"
#include "util/error.h"

using namespace std::chrono_literals;
using namespace trainctl::launch;
using trainctl::RendezvousError;

namespace {
std::vector<char> bytes(const std::string& s) { return {s.begin(), s.end()}; }
std::string text(const std::vector<char>& v) { return {v.begin(), v.end()}; }

StoreClientOptions quick_options() {
  StoreClientOptions o;
  o.connect_timeout = 2s;
  o.timeout = 5s;
  return o;
}
}  // namespace

TEST_CASE("store: set, get, check and add", "[launch]") {
  TcpStoreServer server("secret-token", 0, "127.0.0.1");
  REQUIRE(server.port() > 0);
  TcpStoreClient a("127.0.0.1", server.port(), "secret-token", quick_options());
  TcpStoreClient b("127.0.0.1", server.port(), "secret-token", quick_options());

  a.set("k", bytes("v1"));
  CHECK(text(b.get("k")) == "v1");
  a.set("k", bytes("v2"));  // keys are write-many
  CHECK(text(b.get("k")) == "v2");
  a.set("empty", {});
  CHECK(b.get("empty").empty());
  CHECK(b.check({"k", "empty"}));
  CHECK_FALSE(b.check({"k", "missing"}));

  CHECK(a.add("counter", 1) == 1);
  CHECK(b.add("counter", 5) == 6);
  CHECK(a.add("counter", -2) == 4);
  CHECK(b.get_string("counter", 1s) == "4");

  std::string big(3 << 20, 'x');  // larger than one socket buffer
  a.set_string("big", big);
  CHECK(b.get_string("big", 1s) == big);
}

TEST_CASE("store: get and wait block until another client sets the key", "[launch]") {
  TcpStoreServer server("t", 0, "127.0.0.1");
  TcpStoreClient waiter("127.0.0.1", server.port(), "t", quick_options());
  TcpStoreClient writer("127.0.0.1", server.port(), "t", quick_options());

  std::thread later([&] {
    std::this_thread::sleep_for(100ms);
    writer.set("a", bytes("1"));
    std::this_thread::sleep_for(100ms);
    writer.set("b", bytes("2"));
  });
  auto start = std::chrono::steady_clock::now();
  waiter.wait({"a", "b"}, 5s);
  auto waited = std::chrono::steady_clock::now() - start;
  CHECK(waited >= 150ms);
  CHECK(text(waiter.get("b")) == "2");
  later.join();

  std::thread later_get([&] {
    std::this_thread::sleep_for(50ms);
    writer.set("c", bytes("3"));
  });
  CHECK(text(waiter.get("c", 5s)) == "3");
  later_get.join();
}

TEST_CASE("store: wait and get time out with a RendezvousError naming the key", "[launch]") {
  TcpStoreServer server("t", 0, "127.0.0.1");
  TcpStoreClient c("127.0.0.1", server.port(), "t", quick_options());
  auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(c.wait({"never"}, 300ms),
                    Catch::Contains("timed out") && Catch::Contains("'never'"));
  auto waited = std::chrono::steady_clock::now() - start;
  CHECK(waited >= 300ms);
  CHECK(waited < 3s);
  CHECK_THROWS_AS(c.get("never", 100ms), RendezvousError);
  // The connection stays usable after a timeout.
  c.set("after", bytes("ok"));
  CHECK(text(c.get("after")) == "ok");
}

TEST_CASE("store: a client with a wrong token is rejected, the right one served", "[launch]") {
  TcpStoreServer server("the-job-token", 0, "127.0.0.1");
  CHECK_THROWS_AS(TcpStoreClient("127.0.0.1", server.port(), "not-the-token", quick_options()),
                  TokenRejectedError);
  CHECK_THROWS_WITH(TcpStoreClient("127.0.0.1", server.port(), "", quick_options()),
                    Catch::Contains("store at 127.0.0.1:" + std::to_string(server.port()) +
                                    " rejected the job token"));
  TcpStoreClient good("127.0.0.1", server.port(), "the-job-token", quick_options());
  good.set("x", bytes("y"));
  CHECK(text(good.get("x")) == "y");
}

TEST_CASE("a repeated warning is let through at most once per interval, with a count", "[launch]") {
  RepeatLimiter limit(1s);
  const RepeatLimiter::Clock::time_point t0{};
  CHECK(limit.admit(t0 + 10s) == 0u);  // the first one at once
  CHECK_FALSE(limit.admit(t0 + 10s + 100ms));
  CHECK_FALSE(limit.admit(t0 + 10s + 900ms));
  CHECK_FALSE(limit.overdue(t0 + 10s + 950ms));  // too early for the summary
  CHECK(limit.admit(t0 + 11s) == 2u);            // the next one carries the two held back
  CHECK_FALSE(limit.admit(t0 + 11s + 10ms));
  CHECK(limit.overdue(t0 + 12s + 10ms) == 1u);  // a burst that stopped is still summarised
  CHECK_FALSE(limit.overdue(t0 + 20s));         // once
}

TEST_CASE("store: a flood of clients with a wrong token is logged once per second, counted",
          "[launch]") {
  std::ostringstream out;
  auto previous = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>(
      "capture", std::make_shared<spdlog::sinks::ostream_sink_mt>(out)));
  constexpr int kClients = 40;
  {
    TcpStoreServer server("the-job-token", 0, "127.0.0.1");
    for (int i = 0; i < kClients; ++i) {
      CHECK_THROWS_AS(TcpStoreClient("127.0.0.1", server.port(), "wrong", quick_options()),
                      TokenRejectedError);
    }
  }
  spdlog::set_default_logger(previous);
  size_t lines = 0;
  std::istringstream in(out.str());
  for (std::string line; std::getline(in, line);)
    lines += line.find("rendezvous store") != line.npos;
  INFO(out.str());
  // One line per second of the flood (it takes well under a few seconds), not one per client.
  CHECK(lines >= 1);
  CHECK(lines < 10);
  CHECK_THAT(out.str(), Catch::Contains("rejected a client from 127.0.0.1"));
}

TEST_CASE("store: unreachable store and lost store are RendezvousErrors", "[launch]") {
  int port = 0;
  {
    TcpStoreServer probe("t", 0, "127.0.0.1");
    port = probe.port();
  }
  StoreClientOptions o = quick_options();
  o.connect_timeout = 300ms;
  CHECK_THROWS_WITH(
      TcpStoreClient("127.0.0.1", port, "t", o),
      Catch::Contains("cannot reach the rendezvous store at 127.0.0.1:" + std::to_string(port)));

  auto server = std::make_unique<TcpStoreServer>("t", 0, "127.0.0.1");
  TcpStoreClient c("127.0.0.1", server->port(), "t", quick_options());
  c.set("k", bytes("v"));
  server.reset();
  CHECK_THROWS_WITH(c.check({"k"}), Catch::Contains("lost the connection"));
}

TEST_CASE("store: a second server on a busy port says which port", "[launch]") {
  TcpStoreServer first("t", 0, "127.0.0.1");
  CHECK_THROWS_WITH(
      TcpStoreServer("t", first.port(), "127.0.0.1"),
      Catch::Contains(std::to_string(first.port())) && Catch::Contains("--master-port"));
}

TEST_CASE("store: prefixed views do not see each other's keys", "[launch]") {
  TcpStoreServer server("t", 0, "127.0.0.1");
  auto client = std::make_shared<TcpStoreClient>("127.0.0.1", server.port(), "t", quick_options());
  PrefixedStore a0(client, attempt_prefix(0));
  PrefixedStore a1(client, attempt_prefix(1));
  a0.set("rank0", bytes("first attempt"));
  CHECK_FALSE(client->check({"attempt/1/rank0"}));
  CHECK(client->check({"attempt/0/rank0"}));
  CHECK_THROWS_AS(a1.wait({"rank0"}, 100ms), RendezvousError);
}

TEST_CASE("job tokens are 128 random bits and the token file is private", "[launch]") {
  std::string t1 = generate_token();
  std::string t2 = generate_token();
  CHECK(t1.size() == 32);
  CHECK(t1.find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(t1 != t2);
  CHECK(constant_time_equal(t1, t1));
  CHECK_FALSE(constant_time_equal(t1, t2));
  CHECK_FALSE(constant_time_equal(t1, t1.substr(1)));

  auto dir = std::filesystem::temp_directory_path() /
             ("trainctl-token-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto file = token_file_path(dir);
  CHECK_FALSE(read_token_file(file).has_value());
  write_token_file(file, t1);
  CHECK(read_token_file(file) == t1);
  struct stat st {};
  REQUIRE(::stat(file.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  write_token_file(file, t2);  // replaced atomically
  CHECK(read_token_file(file) == t2);
  std::filesystem::remove_all(dir);
}

TEST_CASE("worker environment round-trips through the process environment", "[launch]") {
  WorkerEnv e;
  e.rank = 3;
  e.local_rank = 1;
  e.world_size = 4;
  e.node_rank = 1;
  e.nnodes = 2;
  e.store_addr = "10.0.0.1";
  e.store_port = 29501;
  e.token = "abc";
  e.node_addr = "10.0.0.2";
  e.run_dir = "/runs/x";
  e.config = "/runs/x/config.resolved.yaml";
  e.mode = WorkerMode::bench_comm;
  e.restart = 2;
  export_worker_env(e);
  WorkerEnv r = read_worker_env();
  CHECK(r.rank == 3);
  CHECK(r.local_rank == 1);
  CHECK(r.world_size == 4);
  CHECK(r.node_rank == 1);
  CHECK(r.nnodes == 2);
  CHECK(r.store_addr == "10.0.0.1");
  CHECK(r.store_port == 29501);
  CHECK(r.token == "abc");
  CHECK(r.node_addr == "10.0.0.2");
  CHECK(r.run_dir == "/runs/x");
  CHECK(r.config == "/runs/x/config.resolved.yaml");
  CHECK(r.mode == WorkerMode::bench_comm);
  CHECK(r.restart == 2);
  CHECK(r.console_fd == -1);

  ::setenv("TRAINCTL_RANK", "four", 1);
  CHECK_THROWS_WITH(read_worker_env(), Catch::Contains("TRAINCTL_RANK"));
  ::unsetenv("TRAINCTL_RANK");
  CHECK_THROWS_WITH(read_worker_env(), Catch::Contains("TRAINCTL_RANK is not set"));
  for (const auto& [name, value] : worker_env_vars(e)) ::unsetenv(name.c_str());
}
