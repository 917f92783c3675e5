#pragma once
// Finding and loading the CUDA plugin (libtrainctl_cuda.so) at run time. The CPU binary
// never links CUDA, cuBLAS or NCCL: it starts on any machine, and only a job that asks for
// `device: cuda` loads them, through this file.
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda_abi/cuda_plugin_api.h"

namespace trainctl::device {

// device: cuda cannot run here; the message says what is missing and what to do.
class DeviceUnavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline constexpr const char* kCudaPluginFileName = "libtrainctl_cuda.so";

// Whether this build produced the plugin (the CUDA toolkit was found at configure time).
bool cuda_plugin_built();

// Where the plugin is looked for, in order: $TRAINCTL_CUDA_PLUGIN (a file path, exclusive
// when set), next to the running executable, and the build tree it was built in.
std::vector<std::string> cuda_plugin_candidates();

// Loads the plugin (once per process; later calls return the same table; it is never
// unloaded). Throws DeviceUnavailable naming what is missing: the plugin file, a CUDA
// library it needs (with the loader's message), or an ABI mismatch.
const cuda_abi::CudaPluginApi& load_cuda_plugin();

struct CudaAvailability {
  bool available = false;
  std::string plugin_path;           // set once the plugin loaded
  std::string build_info;            // the plugin's CUDA/NCCL versions
  std::vector<std::string> devices;  // one description per visible GPU
  std::string reason;                // why not available (empty when available)
};

// Whether `device: cuda` can run in this process: plugin loadable and at least one GPU
// visible. Never throws; `reason` is a complete sentence for the user, e.g.
// "device: cuda: no GPU visible (cudaGetDeviceCount: no CUDA-capable device is detected)".
CudaAvailability cuda_availability();

}  // namespace trainctl::device
