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

  StepCommStats& operator+=(const StepCommStats& o) {
    comm_s += o.comm_s;
    exposed_s += o.exposed_s;
    collectives += o.collectives;
    wire_bytes += o.wire_bytes;
    return *this;
  }
};

}  // namespace trainctl::parallel
