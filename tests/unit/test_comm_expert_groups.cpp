// Expert parallelism's groups (comm/rank_coords.h) and the all-to-all they run
// (Communicator::alltoallv through shared memory and through Gloo), checked by the
// collective self-test with blocks of varied sizes, some empty.
#include <catch2/catch.hpp>

#include <map>
#include <memory>
#include <vector>

#include "comm/gloo/gloo_groups.h"
#include "comm/rank_coords.h"
#include "comm/self_test.h"
#include "test_comm_support.h"

namespace comm = trainctl::comm;
using comm::testing::run_ranks;

TEST_CASE("ep groups are consecutive DP ranks, edp groups the DP ranks with the same experts",
          "[comm][ep]") {
  comm::Layout layout{4, 2, 2};
  layout.ep = 2;
  // rank = (pp * 4 + dp) * 2 + tp. Rank 13: pp 1, dp 2, tp 1.
  CHECK(comm::ep_group(layout, 13) == std::vector<int>{13, 15});   // dp 2, 3
  CHECK(comm::edp_group(layout, 13) == std::vector<int>{9, 13});   // dp 0, 2
  CHECK(comm::ep_group(layout, 2) == std::vector<int>{0, 2});      // pp 0, dp 1, tp 0
  CHECK(comm::edp_group(layout, 2) == std::vector<int>{2, 6});     // dp 1, 3
  CHECK(comm::ep_group_index(layout, 13) == (1 * 2 + 1) * 2 + 1);  // (pp, tp), dp / ep
  CHECK(comm::edp_group_index(layout, 13) == (1 * 2 + 1) * 2 + 0);
  // Every rank is in exactly one group of each kind, and the groups of a kind are disjoint.
  for (int r = 0; r < layout.world_size(); ++r) {
    for (int q : comm::ep_group(layout, r))
      CHECK(comm::ep_group(layout, q) == comm::ep_group(layout, r));
    for (int q : comm::edp_group(layout, r)) {
      CHECK(comm::edp_group(layout, q) == comm::edp_group(layout, r));
    }
  }
  layout.ep = 3;
  CHECK_THROWS_AS(comm::ep_group(layout, 0), std::invalid_argument);
}

TEST_CASE("with context parallelism, ep groups keep the cp rank and edp groups span every cp rank",
          "[comm][ep][cp]") {
  comm::Layout layout{4, 1, 1};
  layout.cp = 2;
  layout.ep = 2;
  // rank = dp * 2 + cp. Rank 5: dp 2, cp 1.
  CHECK(comm::ep_group(layout, 5) == std::vector<int>{5, 7});         // dp 2, 3 at cp 1
  CHECK(comm::edp_group(layout, 5) == std::vector<int>{0, 1, 4, 5});  // dp 0, 2, both cp
  CHECK(comm::ep_group_index(layout, 5) == 1 * 2 + 1);                // cp 1, dp / ep 1
  CHECK(comm::ep_group_index(layout, 4) == 0 * 2 + 1);
  // Group indices name groups (and their store prefixes): distinct groups, distinct indices.
  std::map<int, std::vector<int>> ep_by_index, edp_by_index;
  for (int r = 0; r < layout.world_size(); ++r) {
    for (int q : comm::ep_group(layout, r)) {
      CHECK(comm::ep_group(layout, q) == comm::ep_group(layout, r));
    }
    const auto [it, fresh] =
        ep_by_index.emplace(comm::ep_group_index(layout, r), comm::ep_group(layout, r));
    CHECK(it->second == comm::ep_group(layout, r));
    const auto [jt, fresh2] =
        edp_by_index.emplace(comm::edp_group_index(layout, r), comm::edp_group(layout, r));
    CHECK(jt->second == comm::edp_group(layout, r));
  }
  CHECK(ep_by_index.size() == 4);   // (cp, dp / ep) pairs
  CHECK(edp_by_index.size() == 2);  // dp % ep
}

TEST_CASE("alltoallv moves blocks of every size through shared memory and through Gloo",
          "[comm][ep][shm]") {
  for (const bool shared : {true, false}) {
    DYNAMIC_SECTION((shared ? "shared memory" : "Gloo TCP")) {
      auto store = std::make_shared<gloo::rendezvous::HashStore>();
      comm::GlooOptions options;
      options.timeout = std::chrono::seconds(60);
      options.shared_memory = shared;
      options.shm_slot_bytes = 4096;  // blocks larger than a slot need several rounds
      comm::Layout layout{4, 1, 1};
      layout.ep = 2;
      std::vector<int> ep_sizes(4), edp_sizes(4);
      run_ranks(4, [&](int rank) {
        auto groups = comm::make_gloo_groups(store, layout, rank, options);
        comm::SelfTestOptions sizes;
        sizes.counts = {1, 7, 1001, 65537};
        comm::run_collective_self_test(groups, sizes);  // world, dp, tp, pp, ep, edp
        ep_sizes[static_cast<size_t>(rank)] = groups.ep->size();
        edp_sizes[static_cast<size_t>(rank)] = groups.edp->size();
      });
      CHECK(ep_sizes == std::vector<int>{2, 2, 2, 2});
      CHECK(edp_sizes == std::vector<int>{2, 2, 2, 2});
    }
  }
}
