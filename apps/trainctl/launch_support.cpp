#include "launch_support.h"

#include "device/cuda_plugin.h"
#include "launch/rank_map.h"
#include "ops/cpu/isa.h"
#include "util/error.h"

namespace trainctl::app {

launch::LaunchOptions launch_options(const LaunchArgs& args, launch::WorkerMode mode) {
  launch::LaunchOptions opt;
  opt.mode = mode;
  opt.cluster = launch::resolve_cluster(args.cluster, launch::process_env());
  opt.token = args.token;
  opt.node_addr = args.node_addr;
  // The launcher picks the CPU kernel path once for its node's workers (they do not see
  // the launcher's TRAINCTL_* variables, only what it passes on).
  opt.worker_env.emplace_back(ops::cpu::kIsaVariable,
                              std::string(ops::cpu::isa_name(ops::cpu::isa_from_environment())));
  return opt;
}

std::vector<std::string> check_gpus(const config::JobSpec& spec, int nnodes) {
  if (spec.device != Device::cuda) return {};
  const device::CudaAvailability gpu = device::cuda_availability();
  if (!gpu.available) throw InputError(gpu.reason + "; or use device: cpu");
  const int per_node = launch::workers_per_node(spec.world_size(), nnodes);
  if (per_node > static_cast<int>(gpu.devices.size())) {
    throw InputError("device: cuda runs one worker per GPU: dp x tp x pp = " +
                     std::to_string(spec.world_size()) + " over " + std::to_string(nnodes) +
                     " node(s) needs " + std::to_string(per_node) + " GPUs per node, but " +
                     std::to_string(gpu.devices.size()) +
                     " are visible (CUDA_VISIBLE_DEVICES); use more nodes or a smaller layout");
  }
  return gpu.devices;
}

std::string version_text() {
  std::string build;
#ifdef NDEBUG
  build = "optimized";
#else
  build = "debug";
#endif
#if defined(__SANITIZE_ADDRESS__)
  build += ", AddressSanitizer";
#endif
#if defined(__clang__)
  build += ", clang " __clang_version__;
#elif defined(__GNUC__)
  build += ", gcc " __VERSION__;
#endif
  return std::string("trainctl ") + TRAINCTL_VERSION + "\nbuild: " + build +
         "; backends: cpu (OpenBLAS, Gloo)\n" + cpu_kernels_text();
}

std::string cpu_kernels_text() {
  namespace cpu = ops::cpu;
  const std::string supported = cpu::isa_list(cpu::supported_isas());
  try {
    const cpu::Isa isa = cpu::isa_from_environment();
    return "cpu kernels: " + std::string(cpu::isa_name(isa)) + " (this CPU: " + supported + "; " +
           cpu::kIsaVariable + " forces one)";
  } catch (const cpu::IsaError& e) {
    return std::string("cpu kernels: error: ") + e.what();
  }
}

void check_cpu_kernels() {
  try {
    ops::cpu::isa_from_environment();
  } catch (const ops::cpu::IsaError& e) {
    throw InputError(e.what());
  }
}

}  // namespace trainctl::app
