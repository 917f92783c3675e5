#pragma once
// What parallel.dp_sync local_sgd / diloco and PowerSGD add to a checkpoint, so that a resume on
// the same layout continues bit for bit. Between synchronisations every DP replica has its own
// parameters and optimizer state: DP replica 0's are the checkpoint's parameters and
// optimizer state as usual; replica r >= 1 adds its own as optimizer-state tensors
// "optim.dp<r>_param.<parameter>" and "optim.dp<r>_<state>.<parameter>". DiLoCo's outer
// state, the same on every replica, is "optim.outer_params.<parameter>" and
// "optim.outer_momentum.<parameter>". All are laid out like the parameters, so they reshard
// over tp and pp like them.
//
// PowerSGD (parallel.grad_compression: powersgd) adds each DP rank's error feedback,
// "optim.dp<r>_powersgd_error.<parameter>", and the warm-start Q of every matrix placed at
// the matrix's offset, "optim.powersgd_q<rank>.<parameter>"; they describe this rank's shard,
// so only a resume on the same dp, tp and pp (and rank) uses them, others start afresh.
//
// A resume with another dp (or from a checkpoint without replica tensors) starts every
// replica from replica 0's parameters and optimizer state; DiLoCo without outer state
// starts its outer optimizer from those parameters with zero momentum.
#include <functional>
#include <string>
#include <vector>

#include "checkpoint/reader.h"
#include "optim/optimizer.h"
#include "parallel/periodic_sync.h"
#include "train/engine.h"

namespace trainctl::train {

// The flat buffers this rank writes beside the parameters' own (each saved per parameter
// under optimizer_tensor_name(name, parameter)); `opt` is this rank's optimizer state.
std::vector<parallel::FlatState> dp_sync_snapshot(Engine& e, const optim::OptimizerState& opt);

// After the parameters and optimizer state were read from `reader`: this replica's own
// state and DiLoCo's outer state, as described above. `say` (may be empty) tells the user
// when replicas restart from replica 0's state.
void restore_dp_sync_state(Engine& e, checkpoint::CheckpointReader& reader,
                           const std::function<void(const std::string&)>& say);

}  // namespace trainctl::train
