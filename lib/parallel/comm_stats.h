#pragma once
// What data-parallel communication cost in one optimizer step, for metrics.
#include <cstddef>

namespace trainctl::parallel {

struct StepCommStats {
  // Seconds spent inside collectives this step (on the communication thread for
  // overlapped gradient buckets; on the caller's thread for blocking ZeRO collectives).
  double comm_s = 0.0;
  // Seconds the training thread itself waited for communication: the part of comm_s
  // that the backward pass did not hide. Equals comm_s for blocking collectives.
  double exposed_s = 0.0;
  int collectives = 0;    // gradient buckets (or ZeRO collectives) run this step
  size_t wire_bytes = 0;  // payload bytes this rank contributed (before the algorithm's fan-out)
  // Bytes this rank sends for the step's gradient/parameter exchange under the
  // bandwidth-optimal (ring) schedule of each collective it ran (metrics' comm_bytes). A
  // model, not a count of what the transport moved: shared memory within a host moves
  // nothing over a network, yet a network link between the same ranks would carry this.
  size_t sent_bytes = 0;

  StepCommStats& operator+=(const StepCommStats& o) {
    comm_s += o.comm_s;
    exposed_s += o.exposed_s;
    collectives += o.collectives;
    wire_bytes += o.wire_bytes;
    sent_bytes += o.sent_bytes;
    return *this;
  }
};

// Bytes one rank of `ranks` sends in a ring allreduce of `bytes` (reduce-scatter, then
// allgather: 2 (ranks - 1) / ranks of the buffer), a reduce-scatter of a `bytes` buffer
// ((ranks - 1) / ranks), and an allgather in which it contributes `own_bytes` (its block
// passes to each of the ranks - 1 others). Zero for one rank.
inline size_t ring_allreduce_sent(size_t bytes, int ranks) {
  return ranks > 1 ? 2 * bytes * static_cast<size_t>(ranks - 1) / static_cast<size_t>(ranks) : 0;
}
inline size_t ring_reduce_scatter_sent(size_t bytes, int ranks) {
  return ranks > 1 ? bytes * static_cast<size_t>(ranks - 1) / static_cast<size_t>(ranks) : 0;
}
inline size_t ring_allgather_sent(size_t own_bytes, int ranks) {
  return ranks > 1 ? own_bytes * static_cast<size_t>(ranks - 1) : 0;
}

}  // namespace trainctl::parallel
