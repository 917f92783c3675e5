#pragma once
// The interface between the CPU binary and libtrainctl_cuda.so (the CUDA backend and the
// NCCL communicator). The plugin is built from the same source tree with the same compiler
// as the binary that loads it, so the table below may use C++ types; only its one entry
// point, `trainctl_cuda_plugin_v1`, has C linkage (so dlsym finds it by a plain name).
// Exceptions thrown by these functions propagate to the caller as usual.
//
// cuda_abi/ is the bottom layer of the CUDA plugin: it includes nothing from lib/ (the
// library types it mentions are only declared), so the loader (device/), the plugin's
// parts (ops/cuda, comm/nccl) and its entry point (cuda_plugin/) all include it downward.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace trainctl::ops {
class Backend;
struct BackendOptions;
}  // namespace trainctl::ops

namespace trainctl::comm {
class Communicator;
}

namespace trainctl::cuda_abi {

// Bumped whenever CudaPluginApi or the types it mentions change shape.
// 2: BackendOptions gained `matmul` (mixed-precision matrix products).
// 3: ops::Backend gained attention_decode (its vtable changed shape).
// 4: ops::Backend gained round_to_type (16-bit kept activations).
inline constexpr uint32_t kCudaPluginAbiVersion = 4;

// The rendezvous store as the plugin sees it (the loader wraps the job's store): NCCL's
// unique ids travel through it. get() blocks until the key exists or the store's timeout
// passes (then it throws).
class KeyValueStore {
 public:
  virtual ~KeyValueStore() = default;
  virtual void set(const std::string& key, const std::vector<char>& value) = 0;
  virtual std::vector<char> get(const std::string& key) = 0;
};

// One process group to create, as seen from the calling rank.
struct NcclGroupRequest {
  std::string name;          // "world", "dp[1]", ...: used in error messages
  std::string store_prefix;  // keys of this group's rendezvous live under it
  int rank = 0;              // the caller's rank in the group
  int size = 1;
};

struct CudaPluginApi {
  uint32_t abi_version;    // kCudaPluginAbiVersion of the plugin's build
  size_t struct_size;      // sizeof(CudaPluginApi) in the plugin's build
  const char* build_info;  // "CUDA 13.0, NCCL 2.28.9, sm 80;90"
  // Visible GPUs. Throws std::runtime_error with the CUDA runtime's reason when it cannot
  // enumerate them (no driver, no device).
  int (*device_count)();
  // "NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB)"
  std::string (*device_description)(int device);
  // A backend bound to `device` (an index among the visible GPUs). The caller owns it.
  ops::Backend* (*make_backend)(int device, const ops::BackendOptions& options);
  // Peak bytes the backend's caching allocator has handed out (0 for other backends).
  size_t (*peak_allocated_bytes)(const ops::Backend& backend);
  // NCCL communicators for `groups`, created in order (every rank of the job calls this
  // with its own groups, in the same kind order), on `device`. timeout_ms bounds every
  // later blocking call (a hung or dead peer raises comm::CommError).
  std::vector<std::unique_ptr<comm::Communicator>> (*make_nccl_communicators)(
      const std::vector<NcclGroupRequest>& groups, KeyValueStore& store, int device,
      int64_t timeout_ms);
};

}  // namespace trainctl::cuda_abi

// The plugin's one exported symbol: the table above (static storage, never null).
extern "C" const trainctl::cuda_abi::CudaPluginApi* trainctl_cuda_plugin_v1();
