#include "launch/rank_map.h"

#include <cstdio>

#include "util/error.h"

namespace trainctl::launch {

int workers_per_node(int world_size, int nnodes) {
  if (nnodes < 1) throw InputError("the number of nodes must be at least 1");
  if (world_size < 1 || world_size % nnodes != 0) {
    throw InputError(
        "world size " + std::to_string(world_size) +
        " (parallel.dp * parallel.tp * parallel.pp * parallel.cp) is not divisible by the " +
        std::to_string(nnodes) +
        " nodes: every node runs the same number of workers; change --nnodes "
        "or the parallel layout");
  }
  return world_size / nnodes;
}

std::vector<RankPlacement> rank_map(const comm::Layout& layout, int nnodes) {
  const int per_node = workers_per_node(layout.world_size(), nnodes);
  std::vector<RankPlacement> map;
  map.reserve(static_cast<size_t>(layout.world_size()));
  for (int r = 0; r < layout.world_size(); ++r) {
    map.push_back({r, r / per_node, r % per_node, comm::coord_of(layout, r)});
  }
  return map;
}

std::string format_rank_map(const std::vector<RankPlacement>& map) {
  // The cp column appears with context parallelism only, so existing layouts print as before.
  bool has_cp = false;
  for (const RankPlacement& p : map) has_cp = has_cp || p.coord.cp > 0;
  std::string out =
      has_cp ? " rank  node  local   dp   cp   tp   pp\n" : " rank  node  local   dp   tp   pp\n";
  char line[64];
  for (const RankPlacement& p : map) {
    if (has_cp) {
      std::snprintf(line, sizeof line, "%5d %5d %6d %4d %4d %4d %4d\n", p.rank, p.node,
                    p.local_rank, p.coord.dp, p.coord.cp, p.coord.tp, p.coord.pp);
    } else {
      std::snprintf(line, sizeof line, "%5d %5d %6d %4d %4d %4d\n", p.rank, p.node, p.local_rank,
                    p.coord.dp, p.coord.tp, p.coord.pp);
    }
    out += line;
  }
  return out;
}

}  // namespace trainctl::launch
