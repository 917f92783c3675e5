#include "report/downsample.h"

#include <algorithm>
#include <array>
#include <utility>
#include <vector>

namespace trainctl::report {

void downsample_for_plot(Series& s, size_t buckets) {
  const size_t n = std::min(s.x.size(), s.y.size());
  if (buckets == 0 || n <= 4 * buckets) return;
  std::vector<double> x, y;
  x.reserve(4 * buckets);
  y.reserve(4 * buckets);
  for (size_t b = 0; b < buckets; ++b) {
    const size_t begin = b * n / buckets, end = (b + 1) * n / buckets;
    if (begin == end) continue;
    size_t lo = begin, hi = begin;
    for (size_t i = begin + 1; i < end; ++i) {
      if (s.y[i] < s.y[lo]) lo = i;
      if (s.y[i] > s.y[hi]) hi = i;
    }
    std::array<size_t, 4> keep{begin, lo, hi, end - 1};
    std::sort(keep.begin(), keep.end());
    for (size_t k = 0; k < keep.size(); ++k) {
      if (k > 0 && keep[k] == keep[k - 1]) continue;
      x.push_back(s.x[keep[k]]);
      y.push_back(s.y[keep[k]]);
    }
  }
  s.x = std::move(x);
  s.y = std::move(y);
}

}  // namespace trainctl::report
