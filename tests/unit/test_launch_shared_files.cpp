// The multi-node start-up check (launch/shared_dir_check.h, launch/node_files_report.h):
// the verdict's messages, the data-file fingerprint, and the exchange itself between two
// "nodes" (threads with their own store clients) that see the same or different run_dirs;
// and the launchers' heartbeats (launch/node_heartbeat.h) that name a node that is gone.
// tests/multihost/ runs both between real hosts.
#include <catch2/catch.hpp>

#include <fstream>
#include <future>
#include <string>
#include <vector>

#include "launch/node_files_report.h"
#include "launch/node_heartbeat.h"
#include "launch/shared_dir_check.h"
#include "launch/tcp_store_client.h"
#include "launch/tcp_store_server.h"
#include "test_scratch.h"

using namespace trainctl;
using namespace trainctl::launch;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

NodeFilesReport report(int node, std::string host) {
  NodeFilesReport r;
  r.node = node;
  r.host = std::move(host);
  r.data = "1000 bytes, first MiB hash 00000000000000aa";
  r.spec_hash = "0123456789abcdef";
  return r;
}

void write_bytes(const fs::path& file, size_t n, char fill, size_t flip_at = SIZE_MAX) {
  std::string bytes(n, fill);
  if (flip_at < n) bytes[flip_at] = static_cast<char>(fill + 1);
  std::ofstream(file, std::ios::binary) << bytes;
}

}  // namespace

TEST_CASE("nodes that agree with node 0 pass the start-up check", "[launch]") {
  std::vector<NodeFilesReport> all{report(0, "host a"), report(1, "host b"), report(2, "host c")};
  CHECK_FALSE(shared_files_verdict(all, "/runs/x", "/data/train.bin"));
  CHECK_FALSE(shared_files_verdict({report(0, "host a")}, "/runs/x", ""));
}

TEST_CASE("a node that cannot see run_dir is named, with what to do", "[launch]") {
  std::vector<NodeFilesReport> all{report(0, "host a"), report(1, "host b"), report(2, "host c")};
  all[2].run_dir_problem = "cannot see /runs/x/.shared_dir_check (No such file or directory)";
  const auto verdict = shared_files_verdict(all, "/runs/x", "/data/train.bin");
  REQUIRE(verdict);
  CHECK_THAT(*verdict, Contains("run_dir /runs/x is not one directory that every node sees"));
  CHECK_THAT(*verdict, Contains("node 2 (host c) cannot see /runs/x/.shared_dir_check"));
  CHECK_THAT(*verdict, !Contains("node 1 (host b)"));
  CHECK_THAT(*verdict, Contains("shared file system"));
  CHECK_THAT(*verdict, Contains("mounts at the same path"));
}

TEST_CASE("a node with another data file or spec is named", "[launch]") {
  std::vector<NodeFilesReport> all{report(0, "host a"), report(1, "host b")};
  all[1].data = "missing: No such file or directory";
  auto verdict = shared_files_verdict(all, "/runs/x", "/data/train.bin");
  REQUIRE(verdict);
  CHECK_THAT(*verdict, Contains("data.path /data/train.bin is not the same file on every node"));
  CHECK_THAT(*verdict, Contains("node 0 (host a): 1000 bytes"));
  CHECK_THAT(*verdict, Contains("node 1 (host b): missing: No such file or directory"));
  CHECK_THAT(*verdict, !Contains("run_dir /runs/x"));

  all[1].data = all[0].data;
  all[1].spec_hash = "fedcba9876543210";
  verdict = shared_files_verdict(all, "/runs/x", "/data/train.bin");
  REQUIRE(verdict);
  CHECK_THAT(*verdict, Contains("the job spec is not the same on every node: node 1 (host b)"));
  CHECK_THAT(*verdict, Contains("--set overrides"));
}

TEST_CASE("node reports survive the store as text", "[launch]") {
  NodeFilesReport r = report(3, "host d,\n10.0.0.4");
  r.run_dir_problem = "cannot see\n/x";
  const NodeFilesReport back = decode_report(encode_report(r));
  CHECK(back.node == 3);
  CHECK(back.host == "host d, 10.0.0.4");
  CHECK(back.run_dir_problem == "cannot see /x");
  CHECK(back.data == r.data);
  CHECK(back.spec_hash == r.spec_hash);
  CHECK_THROWS_AS(decode_report("node=1\n"), std::invalid_argument);
  CHECK_THROWS_AS(decode_report("garbage"), std::invalid_argument);
}

TEST_CASE("the data fingerprint is the size and the first MiB", "[launch]") {
  test::ScratchDir dir("fingerprint");
  const size_t mib = kFingerprintBytes;
  write_bytes(dir.path / "a", mib + 100, 'x');
  write_bytes(dir.path / "same", mib + 100, 'x');
  write_bytes(dir.path / "early", mib + 100, 'x', 10);
  write_bytes(dir.path / "late", mib + 100, 'x', mib + 50);
  write_bytes(dir.path / "longer", mib + 101, 'x');
  const std::string a = file_fingerprint(dir.path / "a");
  CHECK_THAT(a, Contains(std::to_string(mib + 100) + " bytes, first MiB hash "));
  CHECK(file_fingerprint(dir.path / "same") == a);
  CHECK(file_fingerprint(dir.path / "early") != a);
  CHECK(file_fingerprint(dir.path / "late") == a);  // beyond the hashed part: size only
  CHECK(file_fingerprint(dir.path / "longer") != a);
  CHECK_THAT(file_fingerprint(dir.path / "absent"), Contains("missing: No such file"));
  CHECK_THAT(file_fingerprint(dir.path), Contains("missing: not a regular file"));
}

namespace {

// Runs the check on node 0 and node 1 at once, each with its own store client and its own
// view of the job (run_dir, data path); both get the same resolved spec text.
struct Outcome {
  std::string node0, node1;  // the InputError messages, "" when the check passed
};

Outcome run_check(const config::JobSpec& spec0, const config::JobSpec& spec1) {
  TcpStoreServer server("tok", 0, "127.0.0.1");
  auto run = [&](const config::JobSpec& spec, int node) -> std::string {
    TcpStoreClient client("127.0.0.1", server.port(), "tok");
    SharedFilesCheckOptions o;
    o.node = node;
    o.nnodes = 2;
    o.host = "host " + std::to_string(node);
    o.timeout = std::chrono::seconds(30);
    o.fs_grace = std::chrono::milliseconds(0);
    try {
      check_nodes_share_files(client, spec, "same spec", o);
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  };
  auto other = std::async(std::launch::async, run, std::cref(spec1), 1);
  Outcome out;
  out.node0 = run(spec0, 0);
  out.node1 = other.get();
  return out;
}

}  // namespace

TEST_CASE("nodes sharing run_dir and data pass, and a private run_dir fails on both nodes",
          "[launch]") {
  test::ScratchDir dir("shared_check");
  config::JobSpec spec;
  spec.run_dir = dir.path / "run";
  spec.data.type = "tokens";
  spec.data.path = dir.path / "train.bin";
  fs::create_directories(spec.run_dir);
  write_bytes(spec.data.path, 4096, 'a');

  SECTION("one run_dir, one data file") {
    const Outcome out = run_check(spec, spec);
    CHECK(out.node0.empty());
    CHECK(out.node1.empty());
    // The check files are gone again.
    CHECK(std::distance(fs::directory_iterator(spec.run_dir), fs::directory_iterator()) == 0);
  }
  SECTION("node 1 has its own run_dir") {
    config::JobSpec private_dir = spec;
    private_dir.run_dir = dir.path / "elsewhere";
    fs::create_directories(private_dir.run_dir);
    const Outcome out = run_check(spec, private_dir);
    CHECK_THAT(out.node0, Contains("run_dir " + spec.run_dir.string() + " is not one directory"));
    CHECK_THAT(out.node0, Contains("node 1 (host 1) cannot see " +
                                   (private_dir.run_dir / ".shared_dir_check").string()));
    CHECK(out.node1 == out.node0);
  }
  SECTION("node 1 has another data file") {
    config::JobSpec other_data = spec;
    other_data.data.path = dir.path / "other.bin";
    write_bytes(other_data.data.path, 4096, 'b');
    const Outcome out = run_check(spec, other_data);
    CHECK_THAT(out.node0, Contains("data.path " + spec.data.path.string()));
    CHECK_THAT(out.node0, Contains("node 1 (host 1): 4096 bytes, first MiB hash"));
    CHECK(out.node1 == out.node0);
  }
}

TEST_CASE("a node whose launcher stopped beating is silent, and a node that finished is not",
          "[launch]") {
  TcpStoreServer server("tok", 0, "127.0.0.1");
  TcpStoreClient store0("127.0.0.1", server.port(), "tok");
  TcpStoreClient store1("127.0.0.1", server.port(), "tok");
  TcpStoreClient store2("127.0.0.1", server.port(), "tok");
  NodeHeartbeats node0(store0, "beat/", 0, 3), node1(store1, "beat/", 1, 3),
      node2(store2, "beat/", 2, 3);
  node1.beat();
  node2.beat();
  const std::vector<int64_t> before = node0.sample();
  CHECK(before == std::vector<int64_t>{-1, 1, 1});
  // Node 1 beats again (a fresh object: beat() is rate-limited per object), node 2 not.
  NodeHeartbeats(store1, "beat/", 1, 3).beat();
  CHECK(node0.silent_between(before, node0.sample()) == std::vector<int>{2});
  // Node 2 finished: it beats no more, and that is no failure.
  node2.done();
  CHECK(node0.silent_between(before, node0.sample()).empty());
}
