#include "comm/gloo/hierarchical.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace trainctl::comm {

std::vector<std::vector<int>> group_by_host(const std::vector<std::string>& host_ids) {
  std::vector<std::string> seen;
  std::vector<std::vector<int>> hosts;
  for (size_t r = 0; r < host_ids.size(); ++r) {
    auto it = std::find(seen.begin(), seen.end(), host_ids[r]);
    if (it == seen.end()) {
      seen.push_back(host_ids[r]);
      hosts.emplace_back();
      it = seen.end() - 1;
    }
    hosts[static_cast<size_t>(it - seen.begin())].push_back(static_cast<int>(r));
  }
  return hosts;
}

bool hierarchy_pays(const std::vector<std::vector<int>>& hosts) {
  return hosts.size() > 1 && std::any_of(hosts.begin(), hosts.end(),
                                         [](const std::vector<int>& h) { return h.size() > 1; });
}

HierarchicalAllreduce::HierarchicalAllreduce(std::unique_ptr<shm::ShmGroup> local,
                                             std::unique_ptr<Communicator> leaders, int hosts)
    : local_(std::move(local)),
      leaders_(std::move(leaders)),
      hosts_(hosts),
      leader_(!local_ || local_->rank() == 0) {
  if (leader_ && !leaders_ && hosts_ > 1) {
    throw std::invalid_argument("HierarchicalAllreduce: a host's leader needs the leaders' group");
  }
}

void HierarchicalAllreduce::allreduce(float* data, size_t count, ReduceOp op) {
  if (local_) local_->allreduce(data, count, op);  // every rank of the host: the host's total
  if (leader_ && leaders_) leaders_->allreduce(data, count, op);  // leaders: the group's
  if (!local_) return;
  // From the leader to the host's other ranks: they contribute the op's identity, so the
  // shared-memory allreduce hands everyone the leader's values exactly.
  if (!leader_) {
    std::fill(data, data + count,
              op == ReduceOp::sum ? 0.0f : -std::numeric_limits<float>::infinity());
  }
  local_->allreduce(data, count, op);
}

}  // namespace trainctl::comm
