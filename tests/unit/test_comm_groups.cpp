#include <catch2/catch.hpp>

#include <gloo/rendezvous/hash_store.h>
#include <gloo/rendezvous/prefix_store.h>

#include <memory>
#include <string>
#include <vector>

#include "comm/gloo/gloo_groups.h"
#include "comm/self_test.h"
#include "test_comm_support.h"
#include "util/error.h"

namespace comm = trainctl::comm;
using comm::Layout;
using comm::testing::run_ranks;

namespace {

struct GroupView {
  std::string world, dp, tp, pp;
  int dp_rank = -1, tp_rank = -1, pp_rank = -1;
  int dp_size = -1, tp_size = -1, pp_size = -1;
};

}  // namespace

TEST_CASE("make_gloo_groups connects every layout and passes the collective self-test", "[comm]") {
  for (const Layout layout : {Layout{2, 1, 1}, Layout{1, 2, 1}, Layout{1, 1, 2}, Layout{2, 2, 2}}) {
    DYNAMIC_SECTION("dp" << layout.dp << " tp" << layout.tp << " pp" << layout.pp) {
      const int world = layout.world_size();
      auto store = std::make_shared<gloo::rendezvous::HashStore>();
      comm::GlooOptions options;
      options.timeout = std::chrono::seconds(30);
      comm::SelfTestOptions sizes;
      // One layout also runs a few MB (4 MiB + 12 B); the rest stay small to keep the
      // suite fast under sanitizers on two cores.
      sizes.counts = layout.dp == 2 && world == 2 ? std::vector<size_t>{1, 7, 1001, 16385, 1048579}
                                                  : std::vector<size_t>{1, 7, 1001, 65537};
      std::vector<GroupView> views(static_cast<size_t>(world));
      run_ranks(world, [&](int rank) {
        auto groups = comm::make_gloo_groups(store, layout, rank, options);
        comm::run_collective_self_test(groups, sizes);
        auto& v = views[static_cast<size_t>(rank)];
        v = {groups.world->name(), groups.dp->name(), groups.tp->name(), groups.pp->name(),
             groups.dp->rank(),    groups.tp->rank(), groups.pp->rank(), groups.dp->size(),
             groups.tp->size(),    groups.pp->size()};
      });
      for (int r = 0; r < world; ++r) {
        INFO("rank " << r);
        const auto& v = views[static_cast<size_t>(r)];
        const auto c = comm::coord_of(layout, r);
        CHECK(v.world == "world");
        CHECK(v.dp == "dp[" + std::to_string(comm::dp_group_index(layout, r)) + "]");
        CHECK(v.tp == "tp[" + std::to_string(comm::tp_group_index(layout, r)) + "]");
        CHECK(v.pp == "pp[" + std::to_string(comm::pp_group_index(layout, r)) + "]");
        CHECK(v.dp_rank == c.dp);
        CHECK(v.tp_rank == c.tp);
        CHECK(v.pp_rank == c.pp);
        CHECK(v.dp_size == layout.dp);
        CHECK(v.tp_size == layout.tp);
        CHECK(v.pp_size == layout.pp);
      }
    }
  }
}

TEST_CASE("a single-rank job builds its groups without a network peer", "[comm]") {
  auto store = std::make_shared<gloo::rendezvous::HashStore>();
  auto groups = comm::make_gloo_groups(store, Layout{1, 1, 1}, 0, comm::GlooOptions{});
  comm::SelfTestOptions sizes;
  sizes.counts = {1, 7, 1001};
  comm::run_collective_self_test(groups, sizes);
  CHECK(groups.dp->name() == "dp[0]");
  CHECK(groups.world->size() == 1);
}

TEST_CASE("the self-test checker reports group, op, index, expected and got", "[comm]") {
  std::vector<float> got = {0, 1, 2, 3};
  auto identity = [](size_t i) { return static_cast<float>(i); };
  CHECK_NOTHROW(comm::check_collective_result("dp[1]", "allreduce sum", got.data(), 4, identity));
  got[2] = 5;
  CHECK_THROWS_AS(comm::check_collective_result("dp[1]", "allreduce sum", got.data(), 4, identity),
                  comm::SelfTestError);
  CHECK_THROWS_WITH(
      comm::check_collective_result("dp[1]", "allreduce sum", got.data(), 4, identity),
      Catch::Contains("allreduce sum") && Catch::Contains("dp[1]") &&
          Catch::Contains("element 2 is 5, expected 2"));
}

TEST_CASE("self_test_value distinguishes ranks and indices", "[comm]") {
  for (size_t i = 0; i < 50; ++i) {
    for (int a = 0; a < 8; ++a) {
      for (int b = a + 1; b < 8; ++b)
        CHECK(comm::self_test_value(a, i) != comm::self_test_value(b, i));
      CHECK(comm::self_test_value(a, i) != comm::self_test_value(a, i + 1));
    }
  }
}

TEST_CASE("a rank that never arrives makes make_gloo_groups fail with RendezvousError", "[comm]") {
  auto store = std::make_shared<gloo::rendezvous::HashStore>();
  comm::GlooOptions options;
  options.timeout = std::chrono::milliseconds(300);
  CHECK_THROWS_AS(comm::make_gloo_groups(store, Layout{2, 1, 1}, 0, options),
                  trainctl::RendezvousError);
}

TEST_CASE("groups rendezvous under the caller's prefix so restarts do not collide", "[comm]") {
  auto base = std::make_shared<gloo::rendezvous::HashStore>();
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto store =
        std::make_shared<gloo::rendezvous::PrefixStore>("attempt" + std::to_string(attempt), *base);
    run_ranks(2, [&](int rank) {
      auto groups = comm::make_gloo_groups(store, Layout{1, 1, 2}, rank, comm::GlooOptions{});
      float x = static_cast<float>(rank + 1);
      groups.pp->allreduce(&x, 1);
      if (x != 3.0f) throw std::runtime_error("attempt allreduce gave " + std::to_string(x));
    });
  }
  SUCCEED("two attempts over one store");
}
