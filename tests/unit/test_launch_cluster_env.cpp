// Slurm node list expansion and the resolution of nnodes / node rank / master address.
#include <catch2/catch.hpp>
#include <map>

#include "launch/cluster_env.h"
#include "launch/rank_map.h"
#include "util/error.h"

using trainctl::InputError;
using namespace trainctl::launch;

namespace {
EnvLookup fake_env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}
using Hosts = std::vector<std::string>;
}  // namespace

TEST_CASE("node lists expand ranges, zero padding and several groups", "[launch]") {
  CHECK(expand_nodelist("node1") == Hosts{"node1"});
  CHECK(expand_nodelist("node[01-03,7]") == Hosts{"node01", "node02", "node03", "node7"});
  CHECK(expand_nodelist("a[1-2],b3") == Hosts{"a1", "a2", "b3"});
  CHECK(expand_nodelist("gpu-[001-002]-x") == Hosts{"gpu-001-x", "gpu-002-x"});
  CHECK(expand_nodelist("n[08-10]") == Hosts{"n08", "n09", "n10"});
  CHECK(expand_nodelist("r[1-2]n[3,5]") == Hosts{"r1n3", "r1n5", "r2n3", "r2n5"});
  CHECK(expand_nodelist("x[9-10],y[1],z") == Hosts{"x9", "x10", "y1", "z"});
}

TEST_CASE("malformed node lists are input errors", "[launch]") {
  CHECK_THROWS_AS(expand_nodelist("node[1-3"), InputError);
  CHECK_THROWS_AS(expand_nodelist("node1-3]"), InputError);
  CHECK_THROWS_AS(expand_nodelist("node[3-1]"), InputError);
  CHECK_THROWS_AS(expand_nodelist("node[a-b]"), InputError);
  CHECK_THROWS_AS(expand_nodelist("a,,b"), InputError);
  CHECK_THROWS_WITH(expand_nodelist("node[1-3"), Catch::Contains("node[1-3"));
}

TEST_CASE("without flags or Slurm a job runs on one node on any free port", "[launch]") {
  ClusterPlacement p = resolve_cluster({}, fake_env({}));
  CHECK(p.nnodes == 1);
  CHECK(p.node_rank == 0);
  CHECK(p.master_addr == "127.0.0.1");
  CHECK(p.master_port == 0);
  CHECK(p.source == "single node");
}

TEST_CASE("Slurm's environment gives nodes, node rank, master and a job-derived port", "[launch]") {
  auto env = fake_env({{"SLURM_JOB_NODELIST", "gpu[03-06]"},
                       {"SLURM_NNODES", "4"},
                       {"SLURM_NODEID", "2"},
                       {"SLURM_JOB_ID", "123456"}});
  ClusterPlacement p = resolve_cluster({}, env);
  CHECK(p.nnodes == 4);
  CHECK(p.node_rank == 2);
  CHECK(p.master_addr == "gpu03");
  CHECK(p.master_port == 29500 + 456);
  CHECK(p.source == "slurm");

  SECTION("flags override the environment") {
    ClusterFlags flags;
    flags.master_port = 31000;
    flags.master_addr = "10.0.0.1";
    ClusterPlacement q = resolve_cluster(flags, env);
    CHECK(q.master_port == 31000);
    CHECK(q.master_addr == "10.0.0.1");
    CHECK(q.nnodes == 4);
    CHECK(q.source == "flags + slurm");
  }
  SECTION("SLURM_NODELIST is the fallback name and gives nnodes when SLURM_NNODES is unset") {
    ClusterPlacement q = resolve_cluster({}, fake_env({{"SLURM_NODELIST", "a[1-2],b3"}}));
    CHECK(q.nnodes == 3);
    CHECK(q.master_addr == "a1");
  }
}

TEST_CASE("inconsistent placements are input errors", "[launch]") {
  ClusterFlags flags;
  flags.nnodes = 2;
  flags.node_rank = 2;
  CHECK_THROWS_WITH(resolve_cluster(flags, fake_env({})), Catch::Contains("--node-rank"));
  flags.node_rank = 0;
  flags.master_port = 0;  // a free port cannot be agreed on between nodes
  CHECK_THROWS_AS(resolve_cluster(flags, fake_env({})), InputError);
  CHECK_THROWS_WITH(resolve_cluster({}, fake_env({{"SLURM_NNODES", "two"}})),
                    Catch::Contains("SLURM_NNODES"));
}

TEST_CASE("rank map places consecutive ranks on a node, TP fastest", "[launch]") {
  trainctl::comm::Layout layout{2, 2, 2};
  auto map = rank_map(layout, 2);
  REQUIRE(map.size() == 8);
  CHECK(map[3].node == 0);
  CHECK(map[4].node == 1);
  CHECK(map[5].local_rank == 1);
  CHECK(map[5].coord == trainctl::comm::Coord{0, 1, 1});
  std::string table = format_rank_map(map);
  CHECK_THAT(table, Catch::StartsWith(" rank  node  local   dp   tp   pp\n"));
  CHECK_THAT(table, Catch::Contains("    7     1      3    1    1    1\n"));
  CHECK_THROWS_WITH(rank_map(layout, 3), Catch::Contains("not divisible by the 3 nodes"));
}
