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

namespace trainctl::comm {

namespace {

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
  if (group_size > 1) {
    try {
      gloo::rendezvous::PrefixStore group_store(prefix, store);
      context->connectFullMesh(group_store, device);
    } catch (const std::exception& e) {
      throw RendezvousError("connecting group " + name + " (rank " + std::to_string(group_rank) +
                            " of " + std::to_string(group_size) + ", store prefix '" + prefix +
                            "') failed: " + e.what());
    }
  }
  return std::make_unique<GlooCommunicator>(std::move(context), name, options);
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
