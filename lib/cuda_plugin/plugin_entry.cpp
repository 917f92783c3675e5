// The plugin's one exported symbol: the table of factories the CPU binary calls through
// (cuda_abi/cuda_plugin_api.h). The top of libtrainctl_cuda.so: it assembles the CUDA
// backend (ops/cuda) and the NCCL communicators (comm/nccl), which know nothing of each
// other or of this file. Everything else in the library is hidden.
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdio>
#include <string>

#include "comm/nccl/nccl_communicator.h"
#include "cuda_abi/cuda_check.h"
#include "cuda_abi/cuda_plugin_api.h"
#include "ops/cuda/cuda_backend.h"

namespace trainctl::cuda_plugin {

namespace {

#define TRAINCTL_STR2(x) #x
#define TRAINCTL_STR(x) TRAINCTL_STR2(x)

int device_count() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    std::string hint;
    if (e == cudaErrorInsufficientDriver) {
      hint = ": no NVIDIA driver on this machine, or one too old for CUDA 13";
    } else if (e == cudaErrorNoDevice) {
      hint = ": check CUDA_VISIBLE_DEVICES";
    }
    throw std::runtime_error("cudaGetDeviceCount: " + cuda_abi::cuda_error_text(e) + hint);
  }
  return n;
}

std::string device_description(int device) {
  cudaDeviceProp p{};
  TRAINCTL_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
  char mem[32];
  std::snprintf(mem, sizeof mem, "%.1f GiB", static_cast<double>(p.totalGlobalMem) / (1 << 30));
  return std::string(p.name) + " (sm_" + std::to_string(p.major) + std::to_string(p.minor) + ", " +
         mem + ")";
}

ops::Backend* make_backend(int device, const ops::BackendOptions& options) {
  return new ops::cuda::CudaBackend(device, options);
}

size_t peak_allocated_bytes(const ops::Backend& backend) {
  const auto* cuda = dynamic_cast<const ops::cuda::CudaBackend*>(&backend);
  return cuda != nullptr ? cuda->peak_allocated_bytes() : 0;
}

const cuda_abi::CudaPluginApi kApi = {
    cuda_abi::kCudaPluginAbiVersion,
    sizeof(cuda_abi::CudaPluginApi),
    "CUDART_VERSION " TRAINCTL_STR(CUDART_VERSION) ", NCCL " TRAINCTL_STR(NCCL_MAJOR) "." TRAINCTL_STR(
        NCCL_MINOR) "." TRAINCTL_STR(NCCL_PATCH) ", built for sm " TRAINCTL_CUDA_ARCHS,
    &device_count,
    &device_description,
    &make_backend,
    &peak_allocated_bytes,
    &comm::nccl::make_nccl_communicators,
};

}  // namespace

}  // namespace trainctl::cuda_plugin

extern "C" __attribute__((visibility("default"))) const trainctl::cuda_abi::CudaPluginApi*
trainctl_cuda_plugin_v1() {
  return &trainctl::cuda_plugin::kApi;
}
