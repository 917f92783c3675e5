#include "comm/gloo/gloo_groups.h"

#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <exception>
#include <stdexcept>
#include <vector>

#include "comm/gloo/gloo_communicator.h"
#include "comm/gloo/hierarchical.h"
#include "util/error.h"
#include "util/log.h"

namespace trainctl::comm {

namespace {

// Shared memory is connected when allreduce may pick it (auto or shm); it then carries
// reduce_scatter and allgather too. An explicit TCP allreduce keeps the group on TCP.
bool wants_shared_memory(const GlooOptions& options) {
  return options.allreduce_algo == AllreduceAlgo::shm ||
         (options.shared_memory && (options.allreduce_algo == AllreduceAlgo::automatic ||
                                    options.allreduce_algo == AllreduceAlgo::hierarchical));
}

// After the shared-memory probe found ranks on several hosts (its store holds every rank's
// host identity): the group's hierarchical allreduce when its shape pays (several hosts,
// several ranks on one), else null, on every rank alike.
std::unique_ptr<HierarchicalAllreduce> connect_hierarchy(
    gloo::rendezvous::Store& store, std::shared_ptr<gloo::transport::Device>& device,
    const std::string& prefix, const std::string& name, int group_rank, int group_size,
    const GlooOptions& options) {
  gloo::rendezvous::PrefixStore probe(prefix + "/shm", store);
  std::vector<std::string> ids;
  for (int q = 0; q < group_size; ++q) {
    const std::vector<char> id = probe.get("host/" + std::to_string(q));
    ids.emplace_back(id.begin(), id.end());
  }
  const std::vector<std::vector<int>> hosts = group_by_host(ids);
  if (!hierarchy_pays(hosts)) return nullptr;
  size_t host = 0;
  int local_rank = 0;
  for (size_t h = 0; h < hosts.size(); ++h) {
    auto it = std::find(hosts[h].begin(), hosts[h].end(), group_rank);
    if (it != hosts[h].end()) {
      host = h;
      local_rank = static_cast<int>(it - hosts[h].begin());
    }
  }
  const int local_size = static_cast<int>(hosts[host].size());
  std::unique_ptr<shm::ShmGroup> local;
  std::string why_not;
  if (local_size > 1) {
    gloo::rendezvous::PrefixStore local_store(prefix + "/hier/host" + std::to_string(host), store);
    shm::ShmOptions shm_options;
    shm_options.slot_bytes = options.shm_slot_bytes;
    shm_options.timeout = options.timeout;
    local = shm::ShmGroup::connect(local_store, local_rank, local_size, shm_options, &why_not);
  }
  // Every rank must make the same choice: one host without shared memory means none.
  gloo::rendezvous::PrefixStore vote(prefix + "/hier/ok", store);
  const bool ok = local_size == 1 || local != nullptr;
  vote.set(std::to_string(group_rank), std::vector<char>{ok ? '1' : '0'});
  for (int q = 0; q < group_size; ++q) {
    if (vote.get(std::to_string(q)) != std::vector<char>{'1'}) {
      spdlog::info(
          "group {}: no hierarchical allreduce: rank {} has no shared memory with its "
          "host's ranks{}",
          name, q, why_not.empty() ? "" : " (" + why_not + ")");
      return nullptr;
    }
  }
  std::unique_ptr<Communicator> leaders;
  if (local_rank == 0) {
    auto context = std::make_shared<gloo::rendezvous::Context>(static_cast<int>(host),
                                                               static_cast<int>(hosts.size()));
    context->setTimeout(options.timeout);
    gloo::rendezvous::PrefixStore leaders_store(prefix + "/hier/leaders", store);
    context->connectFullMesh(leaders_store, device);
    GlooOptions across = options;
    across.allreduce_algo = AllreduceAlgo::automatic;
    across.shared_memory = false;
    leaders = std::make_unique<GlooCommunicator>(std::move(context), name + "/hosts", across);
  }
  spdlog::info(
      "group {}: hierarchical allreduce: shared memory within each of {} hosts, TCP across "
      "them ({} of the group's {} ranks on this host{})",
      name, hosts.size(), local_size, group_size, local_rank == 0 ? ", this rank leads it" : "");
  return std::make_unique<HierarchicalAllreduce>(std::move(local), std::move(leaders),
                                                 static_cast<int>(hosts.size()));
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
  std::unique_ptr<HierarchicalAllreduce> hierarchical;
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
        if (!shm) {
          hierarchical =
              connect_hierarchy(store, device, prefix, name, group_rank, group_size, options);
        }
      }
    } catch (const std::exception& e) {
      throw RendezvousError(where + " failed: " + e.what());
    }
    if (wants_shared_memory(options) && !shm && !hierarchical) {
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
  return std::make_unique<GlooCommunicator>(std::move(context), name, options, std::move(shm),
                                            std::move(hierarchical));
}

std::shared_ptr<gloo::transport::Device> open_device(const std::string& hostname) {
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = hostname;
    return gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    throw RendezvousError("cannot open a Gloo TCP device on '" + hostname + "': " + e.what());
  }
}

}  // namespace

std::unique_ptr<Communicator> connect_gloo_group(gloo::rendezvous::Store& store,
                                                 const std::string& prefix, const std::string& name,
                                                 int rank, int size, GlooOptions options,
                                                 const std::string& hostname) {
  std::shared_ptr<gloo::transport::Device> device = open_device(hostname);
  options.shared_memory = false;
  if (options.allreduce_algo == AllreduceAlgo::shm ||
      options.allreduce_algo == AllreduceAlgo::hierarchical) {
    options.allreduce_algo = AllreduceAlgo::automatic;
  }
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
  context->setTimeout(options.timeout);
  if (size > 1) {
    try {
      gloo::rendezvous::PrefixStore group_store(prefix, store);
      context->connectFullMesh(group_store, device);
    } catch (const std::exception& e) {
      throw RendezvousError("connecting group " + name + " (rank " + std::to_string(rank) + " of " +
                            std::to_string(size) + ") failed: " + e.what());
    }
  }
  return std::make_unique<GlooCommunicator>(std::move(context), name, options);
}

ProcessGroups make_gloo_groups(std::shared_ptr<gloo::rendezvous::Store> store, const Layout& layout,
                               int rank, const GlooOptions& options, const std::string& hostname) {
  if (!store) throw std::invalid_argument("make_gloo_groups: null store");
  ProcessGroups groups;
  groups.layout = layout;
  groups.rank = rank;
  groups.coord = coord_of(layout, rank);  // validates layout and rank

  std::shared_ptr<gloo::transport::Device> device = open_device(hostname);

  std::vector<int> everyone(static_cast<size_t>(layout.world_size()));
  for (int r = 0; r < layout.world_size(); ++r) everyone[static_cast<size_t>(r)] = r;

  // Every rank connects its groups in the same order (world, dp, tp, pp, cp); groups of one
  // kind are disjoint, so each connectFullMesh waits only for ranks doing the same step.
  groups.world = connect_group(*store, device, {"world", 0, everyone}, rank, options);
  // With context parallelism the gradient group spans dp x cp (the CP ranks hold the same
  // parameters and see different tokens); the data sampler keeps using the dp coordinate.
  const Coord at = groups.coord;
  groups.dp = layout.cp == 1
                  ? connect_group(*store, device,
                                  {"dp", dp_group_index(layout, rank), dp_group(layout, rank)},
                                  rank, options)
                  : connect_group(*store, device,
                                  {"dpcp", at.pp * layout.tp + at.tp, dp_cp_group(layout, rank)},
                                  rank, options);
  groups.tp = connect_group(
      *store, device, {"tp", tp_group_index(layout, rank), tp_group(layout, rank)}, rank, options);
  groups.pp = connect_group(
      *store, device, {"pp", pp_group_index(layout, rank), pp_group(layout, rank)}, rank, options);
  groups.cp = connect_group(
      *store, device, {"cp", cp_group_index(layout, rank), cp_group(layout, rank)}, rank, options);
  if (layout.ep > 1) {
    groups.ep =
        connect_group(*store, device, {"ep", ep_group_index(layout, rank), ep_group(layout, rank)},
                      rank, options);
    groups.edp = connect_group(*store, device,
                               {"edp", edp_group_index(layout, rank), edp_group(layout, rank)},
                               rank, options);
  }
  return groups;
}

}  // namespace trainctl::comm
