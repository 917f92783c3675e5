#include "model/moe/expert_dispatch.h"

#include <cstring>
#include <stdexcept>
#include <string>

namespace trainctl::model::moe {

ExpertDispatch::ExpertDispatch(comm::Communicator& ep, int num_experts)
    : ep_(ep), local_(num_experts / ep.size()) {
  if (num_experts % ep.size() != 0) {
    throw std::invalid_argument("ExpertDispatch: " + std::to_string(num_experts) +
                                " experts do not split over an ep group of " +
                                std::to_string(ep.size()));
  }
}

void ExpertDispatch::make_plan(const int* offsets, DispatchPlan& plan) {
  const auto p = static_cast<size_t>(ep_.size()), El = static_cast<size_t>(local_);
  // Counts travel bit-cast as floats (alltoallv moves bits, never adds them).
  std::vector<float> mine(p * El), theirs(p * El);
  plan.send_rows.assign(p, 0);
  for (size_t d = 0; d < p; ++d) {
    for (size_t j = 0; j < El; ++j) {
      const size_t e = d * El + j;
      const int32_t n = offsets[e + 1] - offsets[e];
      std::memcpy(&mine[e], &n, sizeof n);
      plan.send_rows[d] += static_cast<size_t>(n);
    }
  }
  std::vector<size_t> each(p, El);
  ep_.alltoallv(mine.data(), each.data(), theirs.data(), each.data());
  std::vector<int32_t> count(p * El);  // [source][local expert]
  std::memcpy(count.data(), theirs.data(), count.size() * sizeof(int32_t));
  plan.recv_rows.assign(p, 0);
  plan.local_offsets.assign(El + 1, 0);
  for (size_t s = 0; s < p; ++s) {
    for (size_t j = 0; j < El; ++j) {
      plan.recv_rows[s] += static_cast<size_t>(count[s * El + j]);
      plan.local_offsets[j + 1] += count[s * El + j];
    }
  }
  for (size_t j = 0; j < El; ++j) plan.local_offsets[j + 1] += plan.local_offsets[j];
  // Source s's rows for local expert j follow those of sources 0..s-1 within expert j.
  plan.runs.clear();
  std::vector<int> next(plan.local_offsets.begin(), plan.local_offsets.end() - 1);
  int from = 0;
  for (size_t s = 0; s < p; ++s) {
    for (size_t j = 0; j < El; ++j) {
      const int n = count[s * El + j];
      if (n > 0) plan.runs.push_back({from, next[j], n});
      from += n;
      next[j] += n;
    }
  }
}

void ExpertDispatch::exchange(const std::vector<size_t>& send_rows,
                              const std::vector<size_t>& recv_rows, const float* in, float* out,
                              int width) {
  const size_t p = send_rows.size(), w = static_cast<size_t>(width);
  send_counts_.resize(p);
  recv_counts_.resize(p);
  for (size_t r = 0; r < p; ++r) {
    send_counts_[r] = send_rows[r] * w;
    recv_counts_[r] = recv_rows[r] * w;
  }
  ep_.alltoallv(in, send_counts_.data(), out, recv_counts_.data());
}

void ExpertDispatch::dispatch(const DispatchPlan& plan, const float* local, float* experts,
                              float* scratch, int width) {
  exchange(plan.send_rows, plan.recv_rows, local, scratch, width);
  const size_t w = static_cast<size_t>(width);
  for (const DispatchPlan::Run& r : plan.runs) {
    std::memcpy(experts + static_cast<size_t>(r.to) * w, scratch + static_cast<size_t>(r.from) * w,
                static_cast<size_t>(r.rows) * w * sizeof(float));
  }
}

void ExpertDispatch::combine(const DispatchPlan& plan, const float* experts, float* local,
                             float* scratch, int width) {
  const size_t w = static_cast<size_t>(width);
  for (const DispatchPlan::Run& r : plan.runs) {
    std::memcpy(scratch + static_cast<size_t>(r.from) * w, experts + static_cast<size_t>(r.to) * w,
                static_cast<size_t>(r.rows) * w * sizeof(float));
  }
  exchange(plan.recv_rows, plan.send_rows, scratch, local, width);
}

}  // namespace trainctl::model::moe
