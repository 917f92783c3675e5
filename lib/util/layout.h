#pragma once
// The parallel layout: how many ways a job splits over data (dp), tensor (tp), pipeline
// (pp) and context (cp: each sequence split over cp ranks) parallelism. One vocabulary type for the
// job spec (config::ParallelSpec extends it), the rank map and process groups (comm/rank_coords.h),
// and the layout a checkpoint was written with (checkpoint::ParallelLayout extends it).
namespace trainctl {

struct Layout {
  int dp = 1;
  int tp = 1;
  int pp = 1;
  int cp = 1;
  // Expert parallelism: each MoE layer's experts split over `ep` consecutive DP ranks (ep
  // divides dp). Carved out of dp, so it leaves the world size and the rank map unchanged.
  int ep = 1;
  int world_size() const { return dp * tp * pp * cp; }
  bool operator==(const Layout&) const = default;
};

}  // namespace trainctl
