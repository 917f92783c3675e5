#include "device/cuda_plugin.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <exception>
#include <filesystem>
#include <system_error>

namespace trainctl::device {

namespace fs = std::filesystem;

namespace {

constexpr const char* kPrefix = "device: cuda needs the CUDA plugin (libtrainctl_cuda.so)";

std::string executable_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.parent_path().string();
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// The first candidate that exists; throws DeviceUnavailable when none does.
std::string locate_plugin() {
  const std::vector<std::string> candidates = cuda_plugin_candidates();
  if (const char* env = std::getenv("TRAINCTL_CUDA_PLUGIN"); env != nullptr && *env != '\0') {
    if (!fs::exists(env)) {
      throw DeviceUnavailable(std::string(kPrefix) + ", but TRAINCTL_CUDA_PLUGIN=" + env +
                              " does not exist");
    }
    return env;
  }
  if (!cuda_plugin_built()) {
    throw DeviceUnavailable(std::string(kPrefix) +
                            ", which this build does not have: CUDA toolkit not found at build "
                            "time (rebuild on a machine with the CUDA 13 toolkit in "
                            "/usr/local/cuda, or configure with -DTRAINCTL_CUDA=ON), or set "
                            "TRAINCTL_CUDA_PLUGIN to a plugin built elsewhere");
  }
  for (const std::string& c : candidates) {
    if (fs::exists(c)) return c;
  }
  throw DeviceUnavailable(std::string(kPrefix) + ", which was not found (looked at " +
                          join(candidates) +
                          "): build it with `cmake --build BUILD --target trainctl_cuda`, or set "
                          "TRAINCTL_CUDA_PLUGIN to its path");
}

}  // namespace

bool cuda_plugin_built() {
#ifdef TRAINCTL_CUDA_PLUGIN_BUILT
  return true;
#else
  return false;
#endif
}

std::vector<std::string> cuda_plugin_candidates() {
  if (const char* env = std::getenv("TRAINCTL_CUDA_PLUGIN"); env != nullptr && *env != '\0') {
    return {env};
  }
  std::vector<std::string> out;
  if (const std::string dir = executable_dir(); !dir.empty()) {
    out.push_back((fs::path(dir) / kCudaPluginFileName).string());
  }
#ifdef TRAINCTL_CUDA_PLUGIN_BUILD_PATH
  if (out.empty() || out.front() != TRAINCTL_CUDA_PLUGIN_BUILD_PATH) {
    out.push_back(TRAINCTL_CUDA_PLUGIN_BUILD_PATH);
  }
#endif
  return out;
}

const cuda_abi::CudaPluginApi& load_cuda_plugin() {
  const std::string path = locate_plugin();
  // RTLD_NODELETE: backends and communicators made by the plugin may outlive any handle;
  // the library stays mapped for the life of the process. dlopen counts repeated opens,
  // so calling this again is cheap and returns the same table.
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (handle == nullptr) {
    const char* err = ::dlerror();
    throw DeviceUnavailable(
        "device: cuda: the CUDA plugin " + path +
        " cannot be loaded; the CUDA 13 runtime (libcudart.so.13), cuBLASLt "
        "(libcublasLt.so.13) and NCCL (libnccl.so.2) must be installed and on the library "
        "path (LD_LIBRARY_PATH): " +
        (err != nullptr ? err : "unknown dlopen error"));
  }
  ::dlerror();  // clear any stale error before dlsym
  void* sym = ::dlsym(handle, "trainctl_cuda_plugin_v1");
  if (sym == nullptr) {
    // Copy the message first: dlclose frees the string dlerror returned.
    const char* err = ::dlerror();
    const std::string why = err != nullptr ? err : "symbol is null";
    ::dlclose(handle);
    throw DeviceUnavailable("device: cuda: " + path +
                            " is not a trainctl CUDA plugin (no trainctl_cuda_plugin_v1: " + why +
                            ")");
  }
  using Entry = const cuda_abi::CudaPluginApi* (*)();
  const cuda_abi::CudaPluginApi* api = reinterpret_cast<Entry>(sym)();
  if (api == nullptr || api->abi_version != cuda_abi::kCudaPluginAbiVersion ||
      api->struct_size != sizeof(cuda_abi::CudaPluginApi)) {
    ::dlclose(handle);
    throw DeviceUnavailable(
        "device: cuda: the CUDA plugin " + path +
        " was built from a different trainctl version (plugin ABI " +
        (api != nullptr ? std::to_string(api->abi_version) : "?") + ", this binary expects " +
        std::to_string(cuda_abi::kCudaPluginAbiVersion) + "); rebuild both from one source tree");
  }
  return *api;
}

CudaAvailability cuda_availability() {
  CudaAvailability a;
  try {
    const cuda_abi::CudaPluginApi& api = load_cuda_plugin();
    a.plugin_path = locate_plugin();
    a.build_info = api.build_info;
    int count = 0;
    try {
      count = api.device_count();
    } catch (const std::exception& e) {
      a.reason = std::string("device: cuda: no GPU visible (") + e.what() + ")";
      return a;
    }
    if (count == 0) {
      a.reason =
          "device: cuda: no GPU visible (cudaGetDeviceCount: 0 devices; check "
          "CUDA_VISIBLE_DEVICES)";
      return a;
    }
    for (int d = 0; d < count; ++d) a.devices.push_back(api.device_description(d));
    a.available = true;
  } catch (const std::exception& e) {
    a.reason = e.what();
  }
  return a;
}

}  // namespace trainctl::device
