#include "comm/rank_coords.h"

#include <stdexcept>
#include <string>

namespace trainctl::comm {

namespace {

void check_layout(const Layout& layout) {
  if (layout.dp < 1 || layout.tp < 1 || layout.pp < 1 || layout.cp < 1) {
    throw std::invalid_argument(
        "invalid parallel layout dp=" + std::to_string(layout.dp) +
        " tp=" + std::to_string(layout.tp) + " pp=" + std::to_string(layout.pp) +
        " cp=" + std::to_string(layout.cp) + ": every degree must be at least 1");
  }
}

void check_rank(const Layout& layout, int rank) {
  check_layout(layout);
  if (rank < 0 || rank >= layout.world_size()) {
    throw std::out_of_range("rank " + std::to_string(rank) + " is outside the world of " +
                            std::to_string(layout.world_size()) + " ranks");
  }
}

}  // namespace

Coord coord_of(const Layout& layout, int rank) {
  check_rank(layout, rank);
  Coord c;
  c.tp = rank % layout.tp;
  c.cp = (rank / layout.tp) % layout.cp;
  c.dp = (rank / (layout.tp * layout.cp)) % layout.dp;
  c.pp = rank / (layout.tp * layout.cp * layout.dp);
  return c;
}

int rank_of(const Layout& layout, const Coord& c) {
  check_layout(layout);
  if (c.dp < 0 || c.dp >= layout.dp || c.tp < 0 || c.tp >= layout.tp || c.pp < 0 ||
      c.pp >= layout.pp || c.cp < 0 || c.cp >= layout.cp) {
    throw std::out_of_range("coordinate (dp=" + std::to_string(c.dp) +
                            ", tp=" + std::to_string(c.tp) + ", pp=" + std::to_string(c.pp) +
                            ", cp=" + std::to_string(c.cp) + ") is outside the layout");
  }
  return ((c.pp * layout.dp + c.dp) * layout.cp + c.cp) * layout.tp + c.tp;
}

namespace {

// The ranks that differ from `rank` only in the coordinate `axis` (of `size` values), in
// that coordinate's order.
std::vector<int> group_along(const Layout& layout, int rank, int Coord::*axis, int size) {
  Coord c = coord_of(layout, rank);
  std::vector<int> ranks;
  for (c.*axis = 0; c.*axis < size; ++(c.*axis)) ranks.push_back(rank_of(layout, c));
  return ranks;
}

}  // namespace

std::vector<int> dp_group(const Layout& layout, int rank) {
  return group_along(layout, rank, &Coord::dp, layout.dp);
}

std::vector<int> tp_group(const Layout& layout, int rank) {
  return group_along(layout, rank, &Coord::tp, layout.tp);
}

std::vector<int> pp_group(const Layout& layout, int rank) {
  return group_along(layout, rank, &Coord::pp, layout.pp);
}

std::vector<int> cp_group(const Layout& layout, int rank) {
  return group_along(layout, rank, &Coord::cp, layout.cp);
}

std::vector<int> dp_cp_group(const Layout& layout, int rank) {
  Coord c = coord_of(layout, rank);
  std::vector<int> ranks;  // ascending world rank: dp outer, cp inner (the rank map's order)
  for (c.dp = 0; c.dp < layout.dp; ++c.dp) {
    for (c.cp = 0; c.cp < layout.cp; ++c.cp) ranks.push_back(rank_of(layout, c));
  }
  return ranks;
}

int dp_group_index(const Layout& layout, int rank) {
  const Coord c = coord_of(layout, rank);
  return (c.pp * layout.cp + c.cp) * layout.tp + c.tp;
}

int tp_group_index(const Layout& layout, int rank) {
  const Coord c = coord_of(layout, rank);
  return (c.pp * layout.dp + c.dp) * layout.cp + c.cp;
}

int pp_group_index(const Layout& layout, int rank) {
  const Coord c = coord_of(layout, rank);
  return (c.dp * layout.cp + c.cp) * layout.tp + c.tp;
}

int cp_group_index(const Layout& layout, int rank) {
  const Coord c = coord_of(layout, rank);
  return (c.pp * layout.dp + c.dp) * layout.tp + c.tp;
}

namespace {
int ep_of(const Layout& layout) {
  if (layout.ep < 1 || layout.dp % layout.ep != 0) {
    throw std::invalid_argument("invalid expert parallelism ep=" + std::to_string(layout.ep) +
                                ": it must divide dp=" + std::to_string(layout.dp));
  }
  return layout.ep;
}
}  // namespace

std::vector<int> ep_group(const Layout& layout, int rank) {
  const int ep = ep_of(layout);
  Coord c = coord_of(layout, rank);
  const int first = c.dp - c.dp % ep;
  std::vector<int> ranks;
  for (c.dp = first; c.dp < first + ep; ++c.dp) ranks.push_back(rank_of(layout, c));
  return ranks;
}

std::vector<int> edp_group(const Layout& layout, int rank) {
  const int ep = ep_of(layout);
  Coord c = coord_of(layout, rank);
  std::vector<int> ranks;  // ascending world rank: dp outer, cp inner
  for (c.dp = c.dp % ep; c.dp < layout.dp; c.dp += ep) {
    for (c.cp = 0; c.cp < layout.cp; ++c.cp) ranks.push_back(rank_of(layout, c));
  }
  return ranks;
}

int ep_group_index(const Layout& layout, int rank) {
  const int ep = ep_of(layout);
  const Coord c = coord_of(layout, rank);
  return ((c.pp * layout.tp + c.tp) * layout.cp + c.cp) * (layout.dp / ep) + c.dp / ep;
}

int edp_group_index(const Layout& layout, int rank) {
  const int ep = ep_of(layout);
  const Coord c = coord_of(layout, rank);
  return (c.pp * layout.tp + c.tp) * ep + c.dp % ep;
}

Layout replica_layout(const Layout& layout) {
  Layout r = layout;
  r.dp = 1;
  r.ep = 1;
  return r;
}

int replica_rank(const Layout& layout, int rank) {
  Coord c = coord_of(layout, rank);
  c.dp = 0;
  return rank_of(replica_layout(layout), c);
}

}  // namespace trainctl::comm
