#include "parallel/zero_bubble_schedule.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace trainctl::parallel {

std::vector<std::vector<ComputeStep>> zero_bubble_h1_order(int num_stages, int num_micro_batches) {
  const int p = num_stages, m = num_micro_batches;
  if (p < 1 || m < 1) {
    throw std::invalid_argument(
        "zero_bubble_h1_order: need num_stages >= 1 and "
        "num_micro_batches >= 1; got " +
        std::to_string(p) + " stages, " + std::to_string(m) + " micro-batches");
  }
  std::vector<std::vector<ComputeStep>> order(static_cast<size_t>(p));
  for (int s = 0; s < p; ++s) {
    auto& list = order[static_cast<size_t>(s)];
    const int warmup = std::min(p - 1 - s, m);
    int weights = 0;
    for (int mb = 0; mb < warmup; ++mb) list.push_back({OpKind::forward, mb});
    for (int i = 0; i < m - warmup; ++i) {
      list.push_back({OpKind::forward, warmup + i});
      list.push_back({OpKind::backward_input, i});
      if (i >= s) list.push_back({OpKind::backward_weight, weights++});
    }
    for (int mb = m - warmup; mb < m; ++mb) {
      list.push_back({OpKind::backward_input, mb});
      list.push_back({OpKind::backward_weight, weights++});
    }
    while (weights < m) list.push_back({OpKind::backward_weight, weights++});
  }
  return order;
}

}  // namespace trainctl::parallel
