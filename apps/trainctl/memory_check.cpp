#include "memory_check.h"

#include <cstdio>
#include <cstdlib>

#include "device/cuda_plugin.h"
#include "plan/memory_plan.h"
#include "util/error.h"
#include "util/process_memory.h"

namespace trainctl::app {

namespace {

std::string mib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", bytes / (1 << 20));
  return text;
}

// The first visible GPU's memory from the plugin's description, "NAME (sm_90, 79.1 GiB)"
// (cuda_abi/cuda_plugin_api.h); 0 without a GPU.
double visible_gpu_bytes() {
  const device::CudaAvailability gpu = device::cuda_availability();
  if (!gpu.available || gpu.devices.empty()) return 0;
  const std::string& d = gpu.devices.front();
  const size_t unit = d.rfind(" GiB");
  const size_t start = d.rfind(' ', unit == std::string::npos || unit == 0 ? 0 : unit - 1);
  if (unit == std::string::npos || start == std::string::npos) return 0;
  return std::strtod(d.c_str() + start + 1, nullptr) * (1 << 30);
}

// The options list: each single change that lowers the estimate; * marks those that fit.
std::string options_text(const config::JobSpec& spec, double limit, bool* any = nullptr) {
  const std::vector<plan::FitOption> options = plan::fit_options(spec, limit);
  if (any) *any = !options.empty();
  if (options.empty())
    return "no single change lowers the estimate; use a smaller model or seq_len\n";
  std::string out = "options (new estimate per rank; * fits):\n";
  for (const plan::FitOption& o : options) {
    out += std::string(o.peak_bytes <= limit ? "  * " : "    ") + o.change + " -> " +
           mib(o.peak_bytes) + "\n";
  }
  return out;
}

}  // namespace

double memory_limit_bytes(const config::JobSpec& spec, int workers_per_node, std::string* source,
                          double device_memory_bytes) {
  if (spec.runtime.memory_limit_mb) {
    *source = "runtime.memory_limit_mb";
    return *spec.runtime.memory_limit_mb * (1 << 20);
  }
  if (spec.device == Device::cuda) {
    if (device_memory_bytes > 0) {
      *source = "the cluster file's device.memory_gb";
      return device_memory_bytes;
    }
    const double gpu = visible_gpu_bytes();
    if (gpu > 0) {
      *source = "device: cuda: the first visible GPU's memory";
      return gpu;
    }
    *source =
        "none (device: cuda and no GPU visible here: set runtime.memory_limit_mb, or plan "
        "--cluster FILE to check against its GPUs)";
    return 0;
  }
  const std::optional<size_t> total = total_memory_bytes();
  if (!total || workers_per_node < 1) {
    *source = "none (this node's memory is unknown)";
    return 0;
  }
  *source = "this node's memory / " + std::to_string(workers_per_node) + " worker(s)";
  return static_cast<double>(*total) / workers_per_node;
}

std::string memory_text(const config::JobSpec& spec, int workers_per_node,
                        double device_memory_bytes) {
  const std::vector<plan::MemoryBreakdown> plan = plan::plan_memory(spec);
  std::string source;
  const double limit = memory_limit_bytes(spec, workers_per_node, &source, device_memory_bytes);
  std::string out = plan::format_memory_plan(spec, plan);
  out += "  limit " + (limit > 0 ? mib(limit) + " per rank (" + source + ")" : source) + "\n";
  const double peak = plan::peak_rank_bytes(plan);
  if (limit > 0 && peak > limit) {
    out += "over the limit: the job needs about " + mib(peak) + " per rank; " +
           options_text(spec, limit);
  }
  return out;
}

void check_memory_fits(const config::JobSpec& spec, int workers_per_node) {
  std::string source;
  const double limit = memory_limit_bytes(spec, workers_per_node, &source);
  if (limit <= 0) return;
  const std::vector<plan::MemoryBreakdown> plan = plan::plan_memory(spec);
  const double peak = plan::peak_rank_bytes(plan);
  if (peak <= limit) return;
  bool any = false;
  std::string msg = "the job needs about " + mib(peak) + " per rank but the limit is " +
                    mib(limit) + " (" + source + ")\n" + plan::format_memory_plan(spec, plan) +
                    options_text(spec, limit, &any);
  if (any) {
    msg += "or raise runtime.memory_limit_mb if this machine has the memory";
  } else {
    msg.pop_back();
  }
  throw InputError(msg);
}

}  // namespace trainctl::app
