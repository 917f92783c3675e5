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
// With the mixed-precision layout the weights themselves are stored in 16 bits
// (parallel/mixed_params.h), so a reordered sum can also tip a master weight across a
// rounding boundary of the stored format, and that weight then differs by one ulp between
// the two runs (2^-8 relative in bf16, 2^-11 in fp16) where the single worker's own
// rounding moved every weight by at most half an ulp, in signs that largely cancel. AdamW's
// first steps pass such differences on at the size of the learning rate. So the bound
// holds one ulp of the stored weights on top (measured: a tied llama at lr 1e-2 in fp16
// differs by up to 2.4e-4 at tp 2 where fp16's own reach was 3.5e-5; at lr 1e-3 by 4e-6).
//
// And it must have rounded at all: a layout that silently computed in fp32 would sit on
// the fp32 run. In bf16 each layout must be closer to the reduced-precision worker than to
// fp32 (summed over the run's steps). In fp16, whose significand is 8 times finer, the
// single worker's own distance to fp32 is of the size of the rounding decisions a layout
// takes the other way, once the residual stream itself is stored in 16 bits (measured on a
// tied llama over 6 steps: 2.0e-3 summed to the fp16 worker, 1.3e-3 to fp32, where the same
// layout in bf16 stays 4.7e-4 from its worker and 9.8e-3 from fp32); there the layout must
// leave the fp32 run by more than fp32 reordering explains at some step.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

namespace trainctl::test {

// The fp32 layout tolerance (relative, per step): layouts differ in the order of fp32
// sums only (test_layouts_3d.cpp).
inline constexpr double kFp32LayoutTolerance = 2e-5;

// One ulp of a 16-bit format, relative: 2^-(significand bits).
inline double stored_weight_ulp(const std::string& precision) {
  if (precision == "bf16") return std::ldexp(1.0, -8);
  if (precision == "fp16") return std::ldexp(1.0, -11);
  FAIL("no 16-bit format named " << precision);
  return 0;
}

// bound[s] = max over t <= s of |reduced[t] / fp32[t] - 1| + kFp32LayoutTolerance + one ulp
// of the stored weights.
inline std::vector<double> rounding_envelope(const std::vector<double>& reduced,
                                             const std::vector<double>& fp32,
                                             const std::string& precision) {
  REQUIRE(reduced.size() == fp32.size());
  std::vector<double> bound(reduced.size());
  double reach = 0;
  for (size_t s = 0; s < reduced.size(); ++s) {
    reach = std::max(reach, std::fabs(reduced[s] / fp32[s] - 1));
    bound[s] = reach + kFp32LayoutTolerance + stored_weight_ulp(precision);
  }
  return bound;
}

// Checks a layout's per-step losses against the single reduced-precision worker (`one`)
// and the single fp32 worker of the same job; `precision`: "bf16" or "fp16".
inline void check_within_rounding(const std::string& label, const std::string& precision,
                                  const std::vector<double>& layout, const std::vector<double>& one,
                                  const std::vector<double>& fp32) {
  REQUIRE(layout.size() == one.size());
  const std::vector<double> bound = rounding_envelope(one, fp32, precision);
  double to_one = 0, to_fp32 = 0, farthest_from_fp32 = 0;
  for (size_t s = 0; s < one.size(); ++s) {
    const double off = std::fabs(layout[s] / one[s] - 1);
    INFO(label << " step " << s + 1 << ": " << layout[s] << " vs " << one[s] << " (relative " << off
               << ", bound " << bound[s]
               << " = the precision's own reach so far and one ulp of its weights)");
    CHECK(off <= bound[s]);
    to_one += std::fabs(layout[s] - one[s]);
    to_fp32 += std::fabs(layout[s] - fp32[s]);
    farthest_from_fp32 = std::max(farthest_from_fp32, std::fabs(layout[s] / fp32[s] - 1));
  }
  INFO(label << ": summed distance to the reduced-precision worker " << to_one << ", to fp32 "
             << to_fp32 << "; at most " << farthest_from_fp32 << " from fp32 (relative)");
  if (precision == "fp16") {
    CHECK(farthest_from_fp32 > kFp32LayoutTolerance);
  } else {
    CHECK(to_one < to_fp32);
  }
}

}  // namespace trainctl::test
