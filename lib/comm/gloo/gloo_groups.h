#pragma once
// Builds one worker's process groups (world, DP, TP, PP) on the Gloo backend.
#include <gloo/rendezvous/store.h>

#include <memory>
#include <string>

#include "comm/gloo/gloo_options.h"
#include "comm/process_groups.h"

namespace trainctl::comm {

// Connects `rank` to its world group and to the one DP, TP and PP group it belongs to
// (rank map in comm/rank_coords.h). Every rank of the layout must call this with the same
// store, layout and options; it returns once all of this rank's groups are connected.
//
// One TCP device (listening on `hostname`: the address other workers reach this one at)
// serves all groups. Each group rendezvouses under its own prefix of `store`: "world",
// "dp/<i>", "tp/<i>", "pp/<i>" with i the group index (dp_group_index etc.), so a caller
// that restarts workers passes a store already prefixed per attempt. Groups are named
// "world", "dp[i]", "tp[i]", "pp[i]". Groups of size 1 open no connections.
//
// Throws RendezvousError (util/error.h) when a group cannot connect within
// options.timeout (a peer never arrived, or the address is unreachable).
ProcessGroups make_gloo_groups(std::shared_ptr<gloo::rendezvous::Store> store, const Layout& layout,
                               int rank, const GlooOptions& options,
                               const std::string& hostname = "127.0.0.1");

// One group outside the layout's: rank `rank` of `size`, rendezvousing under `prefix` of
// `store`, over TCP on a device of its own (listening on `hostname`) and never shared
// memory, so a peer that dies fails the group's calls at once instead of after a timeout.
// Fault tolerance's per-epoch gradient groups (train/elastic_training.h). Throws
// RendezvousError when the group cannot connect within options.timeout.
std::unique_ptr<Communicator> connect_gloo_group(gloo::rendezvous::Store& store,
                                                 const std::string& prefix, const std::string& name,
                                                 int rank, int size, GlooOptions options,
                                                 const std::string& hostname = "127.0.0.1");

}  // namespace trainctl::comm
