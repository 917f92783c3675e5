#pragma once
// The parallel layout and the rank map (Megatron order, TP fastest so TP peers share a
// node, then CP so a CP ring stays within a node where it can):
// rank = ((pp_rank * dp + dp_rank) * cp + cp_rank) * tp + tp_rank. Pure functions.
#include <vector>

#include "util/layout.h"

namespace trainctl::comm {

using trainctl::Layout;  // the one dp/tp/pp type (util/layout.h)

struct Coord {
  int dp = 0;
  int tp = 0;
  int pp = 0;
  int cp = 0;
  bool operator==(const Coord&) const = default;
};

Coord coord_of(const Layout& layout, int rank);
int rank_of(const Layout& layout, const Coord& c);

// The world ranks in each group containing `rank`, ordered by their rank in the group.
std::vector<int> dp_group(const Layout& layout, int rank);  // same tp, pp
std::vector<int> tp_group(const Layout& layout, int rank);  // same dp, pp
std::vector<int> pp_group(const Layout& layout, int rank);  // same dp, tp
// Context parallelism: the CP ring (same dp, tp, pp), and the group gradients are reduced
// over (same tp, pp; every dp and cp rank): the DP group itself when cp is 1.
std::vector<int> cp_group(const Layout& layout, int rank);
std::vector<int> dp_cp_group(const Layout& layout, int rank);

// Expert parallelism (layout.ep, carved out of dp): the ep group is the `ep` consecutive DP
// ranks that split the experts between them (same tp, pp, cp); the expert-data-parallel
// group is the ranks that hold the same experts (dp rank % ep equal, every cp rank: they
// route other tokens to the same experts), over which expert gradients are summed. This
// rank's place in its ep group is coord.dp % ep.
std::vector<int> ep_group(const Layout& layout, int rank);
std::vector<int> edp_group(const Layout& layout, int rank);
// ((pp * tp + tp_rank) * cp + cp_rank) * dp/ep + dp/ep
int ep_group_index(const Layout& layout, int rank);
int edp_group_index(const Layout& layout, int rank);  // (pp * tp + tp_rank) * ep + dp % ep

// Fault tolerance (runtime.fault_tolerance): a replica is one DP coordinate's ranks, which
// connect among themselves as a layout of dp 1; `rank`'s place in its replica's layout.
Layout replica_layout(const Layout& layout);
int replica_rank(const Layout& layout, int rank);

// Which group of each kind contains `rank`: the groups of one kind are numbered from 0 in
// the order of their lowest world rank. Names groups ("dp[1]") and their store prefixes.
int dp_group_index(const Layout& layout, int rank);  // (pp * cp + cp_rank) * tp + tp_rank
int tp_group_index(const Layout& layout, int rank);  // (pp * dp + dp_rank) * cp + cp_rank
int pp_group_index(const Layout& layout, int rank);  // (dp * cp + cp_rank) * tp + tp_rank
int cp_group_index(const Layout& layout, int rank);  // (pp * dp + dp_rank) * tp + tp_rank

}  // namespace trainctl::comm
