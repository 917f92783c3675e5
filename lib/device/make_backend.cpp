#include "device/make_backend.h"

#include <spdlog/spdlog.h>

#include <stdexcept>
#include <string>

#include "device/cuda_plugin.h"
#include "ops/cpu/cpu_backend.h"

namespace trainctl::device {

std::unique_ptr<ops::Backend> make_backend(Device device, const ops::BackendOptions& options,
                                           int gpu) {
  if (device == Device::cpu) {
    auto backend = ops::make_cpu_backend(options);
    spdlog::info("cpu kernels: {}",
                 ops::cpu::isa_name(static_cast<const ops::cpu::CpuBackend&>(*backend).isa()));
    return backend;
  }
  const cuda_abi::CudaPluginApi& api = load_cuda_plugin();
  int count = 0;
  try {
    count = api.device_count();
  } catch (const std::exception& e) {
    throw DeviceUnavailable(std::string("device: cuda: no GPU visible (") + e.what() + ")");
  }
  if (gpu < 0 || gpu >= count) {
    throw std::out_of_range("device: cuda: GPU " + std::to_string(gpu) + " requested but " +
                            std::to_string(count) + " visible (check CUDA_VISIBLE_DEVICES)");
  }
  return std::unique_ptr<ops::Backend>(api.make_backend(gpu, options));
}

size_t peak_device_bytes(const ops::Backend& backend) {
  if (backend.device() != Device::cuda) return 0;
  // A CUDA backend can only have come from the plugin, which is loaded already.
  return load_cuda_plugin().peak_allocated_bytes(backend);
}

}  // namespace trainctl::device
