#pragma once
// Thinning a long curve for a chart: a chart about 600 px wide shows no more than a few
// thousand points, while a run of a million logged steps would make each curve megabytes
// of SVG. The points (in x order) are cut into buckets of consecutive points and each
// bucket keeps its first, lowest, highest and last point, in their order (M4 aggregation):
// the envelope, every spike and the ends survive, so the drawn line looks the same.
#include <cstddef>

#include "report/svg_plot.h"

namespace trainctl::report {

inline constexpr size_t kPlotBuckets = 1000;

// Leaves a series of at most 4 x `buckets` points as it is.
void downsample_for_plot(Series& s, size_t buckets = kPlotBuckets);

}  // namespace trainctl::report
