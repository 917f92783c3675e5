#pragma once
#include <memory>

#include "comm/communicator.h"
#include "comm/progress.h"
#include "comm/rank_coords.h"

namespace trainctl::comm {

// One worker's view of the job's process groups. Built once per worker (per restart)
// by a backend (comm/gloo/gloo_groups.h on CPUs; comm/nccl, through the CUDA plugin, on
// GPUs), used by the engine.
struct ProcessGroups {
  Layout layout;
  int rank = 0;  // world rank
  Coord coord;   // this rank's (dp, tp, pp, cp) coordinates
  std::unique_ptr<Communicator> world;
  // The group gradients are reduced over: the DP replicas, times the CP ranks when cp > 1
  // ("dpcp[i]", comm::dp_cp_group): every rank in it holds the same parameters.
  std::unique_ptr<Communicator> dp;
  std::unique_ptr<Communicator> tp;
  std::unique_ptr<Communicator> pp;
  // The context-parallel ring (comm::cp_group; a group of one when cp is 1). May be null
  // where a backend builds no CP group (CUDA: cp > 1 is refused at validate).
  std::unique_ptr<Communicator> cp;
  // Expert parallelism (layout.ep > 1; comm/rank_coords.h): the ranks that split the
  // experts, and the DP ranks holding the same experts. Null when ep is 1 (the experts
  // are whole on every DP rank and their gradients go with dp).
  std::unique_ptr<Communicator> ep;
  std::unique_ptr<Communicator> edp;
  // Set when the communicators above are wrapped for the hang watchdog
  // (comm/watched_communicator.h); null otherwise. The engine calls
  // progress->set_step(step) so timeout reports name the step.
  std::shared_ptr<ProgressBoard> progress;
};

}  // namespace trainctl::comm
