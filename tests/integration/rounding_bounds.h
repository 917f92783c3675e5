#pragma once
// How close must a layout's bf16 or fp16 run stay to the single worker's run in the same
// precision? Not a constant that held on the BLAS kernel of the machine that wrote the
// test (issue 36: 1e-4 held on OpenBLAS's SkylakeX sgemm and failed by 1.17e-4 on its
// Haswell/Zen kernel, which sums in another order).
//
// The bound is derived from what the format does to this very job, on this machine's
// kernels, measured in the same test:
//
//   A layout rounds the same operands as the single worker (TP shards are slices of the
//   same rounded matrices) and only reorders fp32 sums. A reordered sum can move a value
//   across a rounding boundary of the reduced format, so the layout takes some of the
//   rounding decisions the other way. It cannot do more than rounding itself does: the
//   distance between the single worker in reduced precision and in fp32 up to step s
//   (every rounding decision of the run at once) bounds the layout's distance at step s,
//   plus the fp32 reordering tolerance that applies to every layout anyway.
//
// And it must have rounded at all: a layout that silently computed in fp32 would sit on
// the fp32 run, so each layout must be closer to the reduced-precision worker than to
// fp32 (summed over the run's steps).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

namespace trainctl::test {

// The fp32 layout tolerance (relative, per step): layouts differ in the order of fp32
// sums only (test_layouts_3d.cpp).
inline constexpr double kFp32LayoutTolerance = 2e-5;

// bound[s] = max over t <= s of |reduced[t] / fp32[t] - 1| + kFp32LayoutTolerance.
inline std::vector<double> rounding_envelope(const std::vector<double>& reduced,
                                             const std::vector<double>& fp32) {
  REQUIRE(reduced.size() == fp32.size());
  std::vector<double> bound(reduced.size());
  double reach = 0;
  for (size_t s = 0; s < reduced.size(); ++s) {
    reach = std::max(reach, std::fabs(reduced[s] / fp32[s] - 1));
    bound[s] = reach + kFp32LayoutTolerance;
  }
  return bound;
}

// Checks a layout's per-step losses against the single reduced-precision worker (`one`)
// and the single fp32 worker of the same job.
inline void check_within_rounding(const std::string& label, const std::vector<double>& layout,
                                  const std::vector<double>& one, const std::vector<double>& fp32) {
  REQUIRE(layout.size() == one.size());
  const std::vector<double> bound = rounding_envelope(one, fp32);
  double to_one = 0, to_fp32 = 0;
  for (size_t s = 0; s < one.size(); ++s) {
    const double off = std::fabs(layout[s] / one[s] - 1);
    INFO(label << " step " << s + 1 << ": " << layout[s] << " vs " << one[s] << " (relative " << off
               << ", bound " << bound[s] << " = the precision's own reach so far)");
    CHECK(off <= bound[s]);
    to_one += std::fabs(layout[s] - one[s]);
    to_fp32 += std::fabs(layout[s] - fp32[s]);
  }
  INFO(label << ": summed distance to the reduced-precision worker " << to_one << ", to fp32 "
             << to_fp32);
  CHECK(to_one < to_fp32);
}

}  // namespace trainctl::test
