#pragma once
// Where each global rank runs: which node, which local slot, and its (dp, tp, pp)
// coordinates. Launchers fill node n with ranks [n * per_node, (n + 1) * per_node), so
// with Megatron's order (TP fastest) TP peers share a node whenever tp divides per_node.
#include <string>
#include <vector>

#include "comm/rank_coords.h"

namespace trainctl::launch {

struct RankPlacement {
  int rank = 0;
  int node = 0;
  int local_rank = 0;
  comm::Coord coord;
};

// Workers per node. Throws InputError unless world_size is a positive multiple of nnodes.
int workers_per_node(int world_size, int nnodes);

std::vector<RankPlacement> rank_map(const comm::Layout& layout, int nnodes);

// A fixed-width table with a header: rank, node, local, dp, tp, pp.
std::string format_rank_map(const std::vector<RankPlacement>& map);

}  // namespace trainctl::launch
