#pragma once
#include <memory>

#include "comm/communicator.h"
#include "comm/layout.h"

namespace trainctl::comm {

// One worker's view of the job's process groups. Built once per worker (per restart)
// by a backend (comm/gloo/gloo_groups.h, later comm/nccl), used by the engine.
struct ProcessGroups {
  Layout layout;
  int rank = 0;  // world rank
  Coord coord;   // this rank's (dp, tp, pp) coordinates
  std::unique_ptr<Communicator> world;
  std::unique_ptr<Communicator> dp;
  std::unique_ptr<Communicator> tp;
  std::unique_ptr<Communicator> pp;
};

}  // namespace trainctl::comm
