#include <catch2/catch.hpp>

#include <stdexcept>
#include <vector>

#include "comm/rank_coords.h"

using trainctl::comm::Coord;
using trainctl::comm::Layout;
namespace comm = trainctl::comm;

TEST_CASE("rank map dp2 tp2 pp2 follows Megatron order (tp fastest)", "[comm]") {
  const Layout layout{2, 2, 2};
  // rank -> (dp, tp, pp)
  const std::vector<Coord> expected = {
      {0, 0, 0}, {0, 1, 0}, {1, 0, 0}, {1, 1, 0},  // pp stage 0
      {0, 0, 1}, {0, 1, 1}, {1, 0, 1}, {1, 1, 1},  // pp stage 1
  };
  for (int r = 0; r < 8; ++r) {
    INFO("rank " << r);
    CHECK(comm::coord_of(layout, r) == expected[static_cast<size_t>(r)]);
    CHECK(comm::rank_of(layout, expected[static_cast<size_t>(r)]) == r);
  }
  CHECK(comm::tp_group(layout, 5) == std::vector<int>{4, 5});
  CHECK(comm::dp_group(layout, 5) == std::vector<int>{5, 7});
  CHECK(comm::pp_group(layout, 5) == std::vector<int>{1, 5});
  CHECK(comm::dp_group(layout, 0) == std::vector<int>{0, 2});
  CHECK(comm::pp_group(layout, 2) == std::vector<int>{2, 6});
  CHECK(comm::tp_group_index(layout, 5) == 2);  // pp 1, dp 0
  CHECK(comm::dp_group_index(layout, 5) == 3);  // pp 1, tp 1
  CHECK(comm::pp_group_index(layout, 5) == 1);  // dp 0, tp 1
}

TEST_CASE("rank map dp2 tp1 pp2", "[comm]") {
  const Layout layout{2, 1, 2};
  const std::vector<Coord> expected = {{0, 0, 0}, {1, 0, 0}, {0, 0, 1}, {1, 0, 1}};
  for (int r = 0; r < 4; ++r) {
    INFO("rank " << r);
    CHECK(comm::coord_of(layout, r) == expected[static_cast<size_t>(r)]);
  }
  CHECK(comm::dp_group(layout, 2) == std::vector<int>{2, 3});
  CHECK(comm::pp_group(layout, 1) == std::vector<int>{1, 3});
  CHECK(comm::tp_group(layout, 3) == std::vector<int>{3});
  CHECK(comm::dp_group_index(layout, 3) == 1);
  CHECK(comm::pp_group_index(layout, 3) == 1);
  CHECK(comm::tp_group_index(layout, 3) == 3);
}

TEST_CASE("rank map round-trips and groups partition the world", "[comm]") {
  for (const Layout layout : {Layout{1, 1, 1}, Layout{4, 1, 1}, Layout{1, 4, 1}, Layout{1, 1, 4},
                              Layout{3, 2, 1}, Layout{2, 3, 2}, Layout{2, 2, 2}}) {
    const int world = layout.world_size();
    INFO("layout dp" << layout.dp << " tp" << layout.tp << " pp" << layout.pp);
    std::vector<int> dp_seen(static_cast<size_t>(world)), tp_seen(static_cast<size_t>(world)),
        pp_seen(static_cast<size_t>(world));
    for (int r = 0; r < world; ++r) {
      const Coord c = comm::coord_of(layout, r);
      REQUIRE(comm::rank_of(layout, c) == r);
      const auto dp = comm::dp_group(layout, r);
      const auto tp = comm::tp_group(layout, r);
      const auto pp = comm::pp_group(layout, r);
      REQUIRE(dp.size() == static_cast<size_t>(layout.dp));
      REQUIRE(tp.size() == static_cast<size_t>(layout.tp));
      REQUIRE(pp.size() == static_cast<size_t>(layout.pp));
      // Ordered by rank in the group: member i has that coordinate equal to i.
      for (int i = 0; i < layout.dp; ++i) CHECK(comm::coord_of(layout, dp[i]).dp == i);
      for (int i = 0; i < layout.tp; ++i) CHECK(comm::coord_of(layout, tp[i]).tp == i);
      for (int i = 0; i < layout.pp; ++i) CHECK(comm::coord_of(layout, pp[i]).pp == i);
      // Every member of a group agrees on the group's membership and index.
      for (int m : dp) {
        CHECK(comm::dp_group(layout, m) == dp);
        CHECK(comm::dp_group_index(layout, m) == comm::dp_group_index(layout, r));
      }
      for (int m : tp) CHECK(comm::tp_group_index(layout, m) == comm::tp_group_index(layout, r));
      for (int m : pp) CHECK(comm::pp_group_index(layout, m) == comm::pp_group_index(layout, r));
      dp_seen[static_cast<size_t>(comm::dp_group_index(layout, r))]++;
      tp_seen[static_cast<size_t>(comm::tp_group_index(layout, r))]++;
      pp_seen[static_cast<size_t>(comm::pp_group_index(layout, r))]++;
    }
    // Group indices are dense: world / group_size groups of each kind, each full.
    for (int i = 0; i < world; ++i) {
      const auto u = static_cast<size_t>(i);
      CHECK(dp_seen[u] == (i < world / layout.dp ? layout.dp : 0));
      CHECK(tp_seen[u] == (i < world / layout.tp ? layout.tp : 0));
      CHECK(pp_seen[u] == (i < world / layout.pp ? layout.pp : 0));
    }
  }
}

TEST_CASE("rank map rejects ranks and layouts outside the world", "[comm]") {
  CHECK_THROWS_AS(comm::coord_of(Layout{2, 2, 2}, 8), std::out_of_range);
  CHECK_THROWS_AS(comm::coord_of(Layout{2, 2, 2}, -1), std::out_of_range);
  CHECK_THROWS_AS(comm::rank_of(Layout{2, 2, 2}, Coord{2, 0, 0}), std::out_of_range);
  CHECK_THROWS_AS(comm::coord_of(Layout{0, 1, 1}, 0), std::invalid_argument);
}
