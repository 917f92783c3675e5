// Creating one rank's NCCL communicators: unique ids through the rendezvous store, one
// ncclCommInitRank per group, and two ncclCommSplit copies per group for point-to-point
// traffic (see nccl_communicator.h).
#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "comm/nccl/nccl_check.h"
#include "comm/nccl/nccl_communicator.h"
#include "cuda_abi/cuda_check.h"

namespace trainctl::comm::nccl {

namespace {

ncclUniqueId exchange_id(const cuda_abi::NcclGroupRequest& g, cuda_abi::KeyValueStore& store) {
  const std::string key = g.store_prefix + "/nccl_id";
  ncclUniqueId id{};
  if (g.rank == 0) {
    TRAINCTL_NCCL_CHECK(ncclGetUniqueId(&id), "creating group " + g.name);
    std::vector<char> bytes(sizeof id);
    std::memcpy(bytes.data(), &id, sizeof id);
    store.set(key, bytes);
  } else {
    const std::vector<char> bytes = store.get(key);
    if (bytes.size() != sizeof id) {
      throw CommError("creating group " + g.name + ": store key " + key + " holds " +
                      std::to_string(bytes.size()) + " bytes, not an NCCL id of " +
                      std::to_string(sizeof id));
    }
    std::memcpy(&id, bytes.data(), sizeof id);
  }
  // Every member announces itself and waits for the others (with the store's timeout)
  // before ncclCommInitRank, which would otherwise wait forever for a rank that died.
  store.set(g.store_prefix + "/nccl_ready/" + std::to_string(g.rank), {'1'});
  for (int r = 0; r < g.size; ++r) store.get(g.store_prefix + "/nccl_ready/" + std::to_string(r));
  return id;
}

NcclHandles init_group(const cuda_abi::NcclGroupRequest& g, cuda_abi::KeyValueStore& store) {
  NcclHandles h;
  if (g.size == 1) return h;  // nothing to talk to: the communicator short-circuits
  const ncclUniqueId id = exchange_id(g, store);
  const std::string ctx = "creating group " + g.name + " (rank " + std::to_string(g.rank) + " of " +
                          std::to_string(g.size) + ")";
  TRAINCTL_NCCL_CHECK(ncclCommInitRank(&h.collective, g.size, id, g.rank), ctx);
  try {
    // Same members, same ranks: color 0, key = rank.
    TRAINCTL_NCCL_CHECK(ncclCommSplit(h.collective, 0, g.rank, &h.up, nullptr), ctx);
    TRAINCTL_NCCL_CHECK(ncclCommSplit(h.collective, 0, g.rank, &h.down, nullptr), ctx);
  } catch (...) {
    for (ncclComm_t c : {h.up, h.down, h.collective}) {
      if (c != nullptr) ncclCommAbort(c);
    }
    throw;
  }
  return h;
}

}  // namespace

std::vector<std::unique_ptr<Communicator>> make_nccl_communicators(
    const std::vector<cuda_abi::NcclGroupRequest>& groups, cuda_abi::KeyValueStore& store,
    int device, int64_t timeout_ms) {
  TRAINCTL_CUDA_CHECK(cudaSetDevice(device));
  std::vector<std::unique_ptr<Communicator>> out;
  for (const cuda_abi::NcclGroupRequest& g : groups) {
    NcclHandles h = init_group(g, store);
    out.push_back(std::make_unique<NcclCommunicator>(g.name, g.rank, g.size, device, h,
                                                     std::chrono::milliseconds(timeout_ms)));
  }
  return out;
}

}  // namespace trainctl::comm::nccl
