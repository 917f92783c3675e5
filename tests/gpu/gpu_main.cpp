// gpu_tests: every CUDA op against the CPU backend, the whole model on both, and the NCCL
// communicator. Without a usable GPU the binary prints why and exits 77, which ctest
// reports as skipped (SKIP_RETURN_CODE 77), never as a failure.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cstdio>

#include "device/cuda_plugin.h"

int main(int argc, char** argv) {
  const trainctl::device::CudaAvailability a = trainctl::device::cuda_availability();
  if (!a.available) {
    std::printf("no GPU: skipped (%s)\n", a.reason.c_str());
    return 77;
  }
  std::printf("CUDA plugin %s (%s)\n", a.plugin_path.c_str(), a.build_info.c_str());
  for (size_t i = 0; i < a.devices.size(); ++i)
    std::printf("GPU %zu: %s\n", i, a.devices[i].c_str());
  return Catch::Session().run(argc, argv);
}
