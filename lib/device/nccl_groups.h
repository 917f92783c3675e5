#pragma once
// Builds one worker's process groups (world, DP, TP, PP) on NCCL, through the CUDA
// plugin: the GPU counterpart of comm/gloo/gloo_groups.h, with the same group names and
// store prefixes.
#include <gloo/rendezvous/store.h>

#include <chrono>
#include <memory>

#include "comm/process_groups.h"

namespace trainctl::device {

// Every rank of `layout` calls this with the same store (prefixed per attempt by the
// caller, as for Gloo) and its own GPU index `gpu`. Each group's rank 0 creates the NCCL
// unique id and publishes it under "<prefix>/nccl_id" ("world", "dp/<i>", "tp/<i>",
// "pp/<i>"); the others read it, then all initialise that group's communicator.
// Communicators accept device (and managed) pointers directly and stage host pointers
// through device memory; every call is blocking, like the Gloo backend's.
// Throws DeviceUnavailable when the plugin or a GPU is missing, RendezvousError when a
// group cannot be formed (a peer never published its id within `timeout`).
comm::ProcessGroups make_nccl_groups(std::shared_ptr<gloo::rendezvous::Store> store,
                                     const comm::Layout& layout, int rank, int gpu,
                                     std::chrono::milliseconds timeout);

}  // namespace trainctl::device
