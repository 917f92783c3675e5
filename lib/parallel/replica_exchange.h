#pragma once
// The data-parallel side of fault tolerance (runtime.fault_tolerance; the membership is
// launch/ft_quorum.h): each rank's gradient group of one epoch holds one rank per live
// replica, at the same (tp, pp, cp) place, in replica order. Over it the replicas sum their
// gradients each step and a replica that joins takes a live peer's whole training state.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "comm/communicator.h"
#include "model/gpt.h"
#include "optim/optimizer.h"

namespace trainctl::parallel {

// Sums `grads` (n floats) and `tail` (k floats: the loss sums and the step's flags) over
// the group, then scales the gradients by `scale` (parallel.dp / live replicas, so the
// gradient is the mean over the tokens the live replicas trained on). A replica that does
// not count this step (`counted` false: a replay's absent replica) adds zeros. Throws
// comm::CommError when a peer fails.
// `staging` (reused across calls) carries both in one collective.
void sum_over_replicas(comm::Communicator& group, float* grads, size_t n, float* tail, size_t k,
                       float scale, bool counted, std::vector<float>& staging);

// What a replica needs besides its parameters and optimizer buffers to continue exactly
// where a peer is: the optimizer's update count and the data position.
struct ReplicaPosition {
  int64_t step = 0;            // the next step to train (0-based)
  int64_t optimizer_step = 0;  // OptimizerState::step
  int64_t first_step = 0;      // data::BatchLayout::first_step / first_sample
  int64_t first_sample = 0;
};

// Every rank of `group` ends with rank `source`'s parameters, optimizer state and
// position (a broadcast; ranks already equal to it receive the same bits). Throws
// comm::CommError when a peer fails (this rank's state is then undefined).
// `extra`: more buffers, the same size on every rank (DiLoCo's outer state).
void copy_replica_state(comm::Communicator& group, int source, model::Gpt& gpt,
                        optim::Optimizer& optimizer, ReplicaPosition& position,
                        const std::vector<std::vector<float>*>& extra = {});

}  // namespace trainctl::parallel
