#pragma once
// A startup check of the communication layer: every collective in every group, with
// results compared exactly against closed-form expected values. Workers run it (e.g.
// `trainctl` with a self-test flag, or tests) to prove the groups and the backend work
// before any training starts.
#include <cstddef>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "comm/process_groups.h"

namespace trainctl::comm {

// A collective returned a wrong value. The message names the group, the operation, the
// element count, the element index, the expected and the received value.
class SelfTestError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct SelfTestOptions {
  // Element counts (floats) each operation is run with: odd counts, a single element,
  // and a few MB (both sides of any per-size algorithm switch).
  std::vector<size_t> counts = {1, 7, 1001, 16385, 1048579};
};

// The value rank `rank` contributes at element `index`. Distinct across ranks and
// indices (so misplaced data shows), and integral so sums are exact in float.
float self_test_value(int rank, size_t index);

// Throws SelfTestError at the first i where got[i] != expected(i) (exact comparison).
void check_collective_result(std::string_view group, std::string_view op, const float* got,
                             size_t count, const std::function<float(size_t)>& expected);

// Runs, in world, dp, tp and pp, then ep and edp when they exist (in that order; collective
// over every rank of the world): allreduce sum and max, reduce_scatter, allgather,
// broadcast from every root, send/recv around the ring, alltoallv with blocks of varied
// sizes (some empty) and barrier, for each of options.counts. Logs one summary
// line per group. Throws SelfTestError on a wrong value and CommError on a failed call.
void run_collective_self_test(const ProcessGroups& groups, const SelfTestOptions& options = {});

// The same checks on one communicator (collective over its ranks).
void run_collective_self_test(Communicator& comm, const SelfTestOptions& options = {});

}  // namespace trainctl::comm
