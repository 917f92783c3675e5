#pragma once
// Hierarchical allreduce, for a group whose ranks sit on several hosts with several ranks
// on at least one of them (a DP group spanning nodes, say): reduce within each host
// through shared memory, allreduce across hosts among one rank per host (the host's
// lowest group rank, its leader) over TCP, then hand the result to the host's other ranks
// through shared memory. Each host then sends one buffer's worth over the network instead
// of one per rank, and the slow link carries 1/(ranks per host) of a flat ring's traffic.
//
// Results are bitwise the same on every rank of the group (each stage is), but the order
// of summation differs from a flat allreduce's: equal within float tolerance.
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/shm/shm_group.h"

namespace trainctl::comm {

// The group's ranks by host: hosts in order of their lowest group rank, each host's
// group ranks ascending. host_ids[r] identifies rank r's host (shm::host_identity()).
std::vector<std::vector<int>> group_by_host(const std::vector<std::string>& host_ids);

// True when hierarchy can help: more than one host and more than one rank on some host.
bool hierarchy_pays(const std::vector<std::vector<int>>& hosts);

class HierarchicalAllreduce {
 public:
  // `local`: this host's ranks through shared memory (null when this rank is alone on its
  // host); `leaders`: the hosts' leaders over TCP (null unless this rank leads its host).
  HierarchicalAllreduce(std::unique_ptr<shm::ShmGroup> local, std::unique_ptr<Communicator> leaders,
                        int hosts);

  // The Communicator contract's allreduce (comm/communicator.h) over the whole group.
  void allreduce(float* data, size_t count, ReduceOp op);

  int hosts() const { return hosts_; }
  bool leader() const { return leader_; }

 private:
  std::unique_ptr<shm::ShmGroup> local_;
  std::unique_ptr<Communicator> leaders_;
  int hosts_;
  bool leader_;
};

}  // namespace trainctl::comm
