#pragma once
// Expert parallelism's token exchange for one MoE layer (parallel.ep > 1,
// docs/expert-parallelism.md).
//
// The ep group's ranks hold disjoint blocks of E / ep routed experts (rank q: experts
// [q El, (q + 1) El), El = E / ep). Each rank routes its own tokens; its gathered rows are
// grouped by global expert (model/moe/router.h's dispatch), so the rows for rank q's
// experts are one contiguous run. Dropless routing sends a varying number of rows, so a
// layer first exchanges the rows per expert (El integers to each peer), then the rows:
//
//   dispatch: local rows (by global expert) --alltoallv--> received rows, source-major,
//             reordered to expert-major (each local expert's rows from source 0, 1, ...:
//             the global token order, as one worker would see them);
//   combine:  the reverse, for the experts' outputs (forward) and input gradients (backward).
//
// The plan is computed once per micro-batch forward (recomputation recomputes the same
// routing bit for bit, so the same plan) and kept for the backward pass.
#include <cstddef>
#include <vector>

#include "comm/communicator.h"

namespace trainctl::model::moe {

struct DispatchPlan {
  std::vector<size_t> send_rows;   // [ep] rows this rank sends to each peer
  std::vector<size_t> recv_rows;   // [ep] rows each peer sends this rank
  std::vector<int> local_offsets;  // [El + 1] received rows grouped by local expert
  // Contiguous runs of rows: received (source-major) row `from` -> expert-major row `to`.
  struct Run {
    int from, to, rows;
  };
  std::vector<Run> runs;
  int received() const { return local_offsets.empty() ? 0 : local_offsets.back(); }
};

class ExpertDispatch {
 public:
  // `ep` is the ep group (its size divides num_experts).
  ExpertDispatch(comm::Communicator& ep, int num_experts);

  // Collective over the ep group: from `offsets` [E + 1] (the local rows of each global
  // expert), exchanges the counts and fills `plan`.
  void make_plan(const int* offsets, DispatchPlan& plan);
  // local [sum send_rows, width] -> expert-major rows [received, width]; `scratch` holds
  // received rows (as many floats as the result).
  void dispatch(const DispatchPlan& plan, const float* local, float* experts, float* scratch,
                int width);
  // expert-major rows [received, width] -> local [sum send_rows, width].
  void combine(const DispatchPlan& plan, const float* experts, float* local, float* scratch,
               int width);

  int local_experts() const { return local_; }

 private:
  void exchange(const std::vector<size_t>& send_rows, const std::vector<size_t>& recv_rows,
                const float* in, float* out, int width);

  comm::Communicator& ep_;
  int local_;
  std::vector<size_t> send_counts_, recv_counts_;  // floats, per peer
};

}  // namespace trainctl::model::moe
