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

namespace {

// One stage's ZB-V list over n >= 2p-1 micro-batches (zero_bubble_v_order).
std::vector<ComputeStep> zbv_stage(int p, int s, int n) {
  std::vector<ComputeStep> list;
  int f0 = 0, f1 = 0, b0 = 0, b1 = 0;
  auto op = [&](OpKind kind, int mb, int chunk) { list.push_back({kind, mb, chunk}); };
  for (int i = 0; i < 2 * (p - s) - 1; ++i) op(OpKind::forward, f0++, 0);
  for (int i = 0; i < s; ++i) {
    op(OpKind::forward, f1++, 1);
    op(OpKind::forward, f0++, 0);
  }
  for (int i = 0; i < p - s; ++i) {
    op(OpKind::forward, f1++, 1);
    op(OpKind::backward_input, b1, 1);
    op(OpKind::backward_weight, b1++, 1);
  }
  while (f1 < f0 || f0 < n) {
    if (f0 < n) op(OpKind::forward, f0++, 0);
    op(OpKind::backward_input, b0, 0);
    op(OpKind::backward_weight, b0++, 0);
    op(OpKind::forward, f1++, 1);
    op(OpKind::backward_input, b1, 1);
    op(OpKind::backward_weight, b1++, 1);
  }
  int w0 = b0, w1 = b1;
  for (int i = 0; i < s; ++i) {
    op(OpKind::backward_input, b0++, 0);
    op(OpKind::backward_input, b1++, 1);
  }
  for (int i = 0; i < p - s; ++i) {
    op(OpKind::backward_input, b0++, 0);
    op(OpKind::backward_weight, w0++, 0);
  }
  while (w1 < b1) op(OpKind::backward_weight, w1++, 1);
  while (w0 < b0) op(OpKind::backward_weight, w0++, 0);
  if (f0 != n || f1 != n || b0 != n || b1 != n) {
    throw std::logic_error("zero_bubble_v_order: unbalanced stage " + std::to_string(s));
  }
  return list;
}

}  // namespace

std::vector<std::vector<ComputeStep>> zero_bubble_v_order(int num_stages, int num_micro_batches) {
  const int p = num_stages, m = num_micro_batches;
  if (p < 1 || m < 1) {
    throw std::invalid_argument(
        "zero_bubble_v_order: need num_stages >= 1 and num_micro_batches >= 1; got " +
        std::to_string(p) + " stages, " + std::to_string(m) + " micro-batches");
  }
  const int n = std::max(m, 2 * p - 1);
  std::vector<std::vector<ComputeStep>> order;
  for (int s = 0; s < p; ++s) {
    std::vector<ComputeStep> list = zbv_stage(p, s, n);
    std::erase_if(list, [m](const ComputeStep& op) { return op.micro_batch >= m; });
    order.push_back(std::move(list));
  }
  return order;
}

}  // namespace trainctl::parallel
