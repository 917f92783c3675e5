#pragma once
// How gradients travel between data-parallel ranks: as fp32, or as bf16 on the wire with
// the sum accumulated in fp32 (`parallel.grad_comm: bf16`), which halves the bytes each
// rank sends when DP is 2 (the common CPU case) at the price of rounding every rank's
// contribution to 8 significant bits.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "comm/communicator.h"

namespace trainctl::parallel {

enum class GradCommDType { fp32, bf16 };

std::string_view to_string(GradCommDType dtype);
// Accepts "fp32" and "bf16"; throws std::invalid_argument naming the choices.
GradCommDType parse_grad_comm_dtype(std::string_view name);

// fp32 -> bf16 with round-to-nearest-even (NaN stays NaN, overflow becomes inf), and back
// (exact). |from_bf16(to_bf16(x)) - x| <= 2^-8 |x| for normal x.
uint16_t to_bf16(float x);
float from_bf16(uint16_t b);

// Bounds the error of GradReducer's bf16 sum over `ranks` contributions g_r, elementwise:
// |result - sum_r g_r| <= bf16_sum_error_bound(ranks) * sum_r |g_r|.
// (2^-8 from rounding each contribution once, plus fp32 rounding of the ranks-1 additions.)
double bf16_sum_error_bound(int ranks);

// Sums buffers over the ranks of a communicator in the chosen wire format. Keeps its
// scratch buffers between calls, so one reducer per thread that communicates.
//
// fp32: Communicator::allreduce (its own algorithm choice).
// bf16: every rank rounds its buffer to bf16 once, the bf16 buffers are allgathered, and
//   each rank adds all contributions in rank order in fp32. Results are therefore bitwise
//   equal on every rank (replicas stay in lock-step) and the error is one bf16 rounding
//   per contribution, never a rounded partial sum (see bf16_sum_error_bound). Bytes
//   received per rank: 2 (ranks - 1) per element, vs 8 (ranks - 1) / ranks for the fp32
//   ring: half at 2 ranks, equal at 4, more beyond (prefer fp32 there).
class GradReducer {
 public:
  GradReducer(comm::Communicator& comm, GradCommDType dtype) : comm_(comm), dtype_(dtype) {}

  // In place: data[i] = sum over ranks of data[i]. Collective over the communicator.
  // Throws comm::CommError when the group fails.
  void allreduce_sum(float* data, size_t count);

  // Bytes of gradient this rank puts on the wire per element, for statistics.
  size_t wire_bytes_per_element() const { return dtype_ == GradCommDType::bf16 ? 2 : 4; }
  // Bytes this rank sends to sum `count` elements (comm_stats.h's ring model): an fp32
  // allreduce, or the allgather of this rank's bf16 copy.
  size_t sent_bytes(size_t count) const;
  GradCommDType dtype() const { return dtype_; }
  int comm_size() const { return comm_.size(); }

 private:
  void allreduce_bf16(float* data, size_t count);

  comm::Communicator& comm_;
  GradCommDType dtype_;
  std::vector<uint16_t> send_;  // this rank's bf16 copy, padded to whole floats
  std::vector<uint16_t> all_;   // every rank's bf16 copy, rank after rank
};

}  // namespace trainctl::parallel
