#include "device/nccl_groups.h"

#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm/rank_coords.h"
#include "device/cuda_plugin.h"
#include "util/error.h"

namespace trainctl::device {

namespace {

// The plugin's view of the job's store.
class GlooKeyValueStore final : public cuda_abi::KeyValueStore {
 public:
  GlooKeyValueStore(gloo::rendezvous::Store& store, std::chrono::milliseconds timeout)
      : store_(store), timeout_(timeout) {}
  void set(const std::string& key, const std::vector<char>& value) override {
    store_.set(key, value);
  }
  std::vector<char> get(const std::string& key) override {
    try {
      store_.wait({key}, timeout_);
    } catch (const std::exception& e) {
      throw RendezvousError("waiting for store key '" + key + "' (NCCL id) failed: " + e.what());
    }
    return store_.get(key);
  }

 private:
  gloo::rendezvous::Store& store_;
  std::chrono::milliseconds timeout_;
};

cuda_abi::NcclGroupRequest request(const std::string& kind, int index,
                                   const std::vector<int>& members, int world_rank) {
  cuda_abi::NcclGroupRequest r;
  const bool world = kind == "world";
  r.name = world ? kind : kind + "[" + std::to_string(index) + "]";
  r.store_prefix = world ? kind : kind + "/" + std::to_string(index);
  r.size = static_cast<int>(members.size());
  r.rank = -1;
  for (int i = 0; i < r.size; ++i) {
    if (members[static_cast<size_t>(i)] == world_rank) r.rank = i;
  }
  if (r.rank < 0)
    throw std::logic_error("rank " + std::to_string(world_rank) + " not in " + r.name);
  return r;
}

}  // namespace

comm::ProcessGroups make_nccl_groups(std::shared_ptr<gloo::rendezvous::Store> store,
                                     const comm::Layout& layout, int rank, int gpu,
                                     std::chrono::milliseconds timeout) {
  if (!store) throw std::invalid_argument("make_nccl_groups: null store");
  comm::ProcessGroups groups;
  groups.layout = layout;
  groups.rank = rank;
  groups.coord = comm::coord_of(layout, rank);  // validates layout and rank

  std::vector<int> everyone(static_cast<size_t>(layout.world_size()));
  for (int r = 0; r < layout.world_size(); ++r) everyone[static_cast<size_t>(r)] = r;
  // Same order as the Gloo groups: world, dp, tp, pp. Groups of one kind are disjoint,
  // so each initialisation waits only for ranks at the same step.
  const std::vector<cuda_abi::NcclGroupRequest> requests = {
      request("world", 0, everyone, rank),
      request("dp", comm::dp_group_index(layout, rank), comm::dp_group(layout, rank), rank),
      request("tp", comm::tp_group_index(layout, rank), comm::tp_group(layout, rank), rank),
      request("pp", comm::pp_group_index(layout, rank), comm::pp_group(layout, rank), rank),
  };
  const cuda_abi::CudaPluginApi& api = load_cuda_plugin();
  GlooKeyValueStore kv(*store, timeout);
  auto comms = api.make_nccl_communicators(requests, kv, gpu, timeout.count());
  if (comms.size() != requests.size()) {
    throw std::logic_error("CUDA plugin returned " + std::to_string(comms.size()) +
                           " communicators for " + std::to_string(requests.size()) + " groups");
  }
  groups.world = std::move(comms[0]);
  groups.dp = std::move(comms[1]);
  groups.tp = std::move(comms[2]);
  groups.pp = std::move(comms[3]);
  return groups;
}

}  // namespace trainctl::device
