#include "comm/gloo/gloo_groups.h"

#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <exception>
#include <stdexcept>
#include <vector>

#include "comm/gloo/gloo_communicator.h"
#include "util/error.h"
#include "util/log.h"

namespace trainctl::comm {

namespace {

// Shared memory is connected when allreduce may pick it (auto or shm); it then carries
// reduce_scatter and allgather too. An explicit TCP allreduce keeps the group on TCP.
bool wants_shared_memory(const GlooOptions& options) {
  return options.allreduce_algo == AllreduceAlgo::shm ||
         (options.shared_memory && options.allreduce_algo == AllreduceAlgo::automatic);
}

struct GroupSpec {
  std::string kind;  // "world", "dp", "tp", "pp"
  int index = 0;     // which group of that kind
  std::vector<int> members;
};

std::unique_ptr<Communicator> connect_group(gloo::rendezvous::Store& store,
                                            std::shared_ptr<gloo::transport::Device>& device,
                                            const GroupSpec& spec, int world_rank,
                                            const GlooOptions& options) {
  const bool is_world = spec.kind == "world";
  const std::string name =
      is_world ? spec.kind : spec.kind + "[" + std::to_string(spec.index) + "]";
  const std::string prefix = is_world ? spec.kind : spec.kind + "/" + std::to_string(spec.index);
  const auto it = std::find(spec.members.begin(), spec.members.end(), world_rank);
  const int group_rank = static_cast<int>(it - spec.members.begin());
  const int group_size = static_cast<int>(spec.members.size());

  auto context = std::make_shared<gloo::rendezvous::Context>(group_rank, group_size);
  context->setTimeout(options.timeout);
  std::unique_ptr<shm::ShmGroup> shm;
  if (group_size > 1) {
    const std::string where = "connecting group " + name + " (rank " + std::to_string(group_rank) +
                              " of " + std::to_string(group_size) + ", store prefix '" + prefix +
                              "')";
    std::string why_not;
    try {
      gloo::rendezvous::PrefixStore group_store(prefix, store);
      context->connectFullMesh(group_store, device);
      if (wants_shared_memory(options)) {
        gloo::rendezvous::PrefixStore shm_store(prefix + "/shm", store);
        shm::ShmOptions shm_options;
        shm_options.slot_bytes = options.shm_slot_bytes;
        shm_options.timeout = options.timeout;
        shm = shm::ShmGroup::connect(shm_store, group_rank, group_size, shm_options, &why_not);
      }
    } catch (const std::exception& e) {
      throw RendezvousError(where + " failed: " + e.what());
    }
    if (wants_shared_memory(options) && !shm) {
      if (options.allreduce_algo == AllreduceAlgo::shm) {
        throw RendezvousError(where +
                              ": runtime.allreduce_algo is shm but shared memory cannot "
                              "be used: " +
                              why_not + " (use auto to fall back to TCP)");
      }
      spdlog::info("group {}: allreduce over TCP, not shared memory: {}", name, why_not);
    }
    if (shm) spdlog::info("group {}: shared memory (all {} ranks on this host)", name, group_size);
  }
  return std::make_unique<GlooCommunicator>(std::move(context), name, options, std::move(shm));
}

}  // namespace

ProcessGroups make_gloo_groups(std::shared_ptr<gloo::rendezvous::Store> store, const Layout& layout,
                               int rank, const GlooOptions& options, const std::string& hostname) {
  if (!store) throw std::invalid_argument("make_gloo_groups: null store");
  ProcessGroups groups;
  groups.layout = layout;
  groups.rank = rank;
  groups.coord = coord_of(layout, rank);  // validates layout and rank

  std::shared_ptr<gloo::transport::Device> device;
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = hostname;
    device = gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    throw RendezvousError("cannot open a Gloo TCP device on '" + hostname + "': " + e.what());
  }

  std::vector<int> everyone(static_cast<size_t>(layout.world_size()));
  for (int r = 0; r < layout.world_size(); ++r) everyone[static_cast<size_t>(r)] = r;

  // Every rank connects its groups in the same order (world, dp, tp, pp); groups of one
  // kind are disjoint, so each connectFullMesh waits only for ranks doing the same step.
  groups.world = connect_group(*store, device, {"world", 0, everyone}, rank, options);
  groups.dp = connect_group(
      *store, device, {"dp", dp_group_index(layout, rank), dp_group(layout, rank)}, rank, options);
  groups.tp = connect_group(
      *store, device, {"tp", tp_group_index(layout, rank), tp_group(layout, rank)}, rank, options);
  groups.pp = connect_group(
      *store, device, {"pp", pp_group_index(layout, rank), pp_group(layout, rank)}, rank, options);
  return groups;
}

}  // namespace trainctl::comm
