#include "memory_check.h"

#include <cstdio>

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

}  // namespace

double memory_limit_bytes(const config::JobSpec& spec, int workers_per_node, std::string* source) {
  if (spec.runtime.memory_limit_mb) {
    *source = "runtime.memory_limit_mb";
    return *spec.runtime.memory_limit_mb * (1 << 20);
  }
  if (spec.device == Device::cuda) {
    *source = "none (device: cuda: set runtime.memory_limit_mb to the GPU's memory to check)";
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

std::string memory_text(const config::JobSpec& spec, int workers_per_node) {
  const std::vector<plan::MemoryBreakdown> plan = plan::plan_memory(spec);
  std::string source;
  const double limit = memory_limit_bytes(spec, workers_per_node, &source);
  std::string out = plan::format_memory_plan(spec, plan);
  out += "  limit " + (limit > 0 ? mib(limit) + " per rank (" + source + ")" : source) + "\n";
  return out;
}

void check_memory_fits(const config::JobSpec& spec, int workers_per_node) {
  std::string source;
  const double limit = memory_limit_bytes(spec, workers_per_node, &source);
  if (limit <= 0) return;
  const std::vector<plan::MemoryBreakdown> plan = plan::plan_memory(spec);
  const double peak = plan::peak_rank_bytes(plan);
  if (peak <= limit) return;
  std::string msg = "the job needs about " + mib(peak) + " per rank but the limit is " +
                    mib(limit) + " (" + source + ")\n" + plan::format_memory_plan(spec, plan);
  const std::vector<plan::FitOption> options = plan::fit_options(spec, limit);
  if (options.empty()) {
    msg += "no single change lowers the estimate; use a smaller model or seq_len";
  } else {
    msg += "options (new estimate per rank; * fits):\n";
    for (const plan::FitOption& o : options) {
      msg += std::string(o.peak_bytes <= limit ? "  * " : "    ") + o.change + " -> " +
             mib(o.peak_bytes) + "\n";
    }
    msg += "or raise runtime.memory_limit_mb if this machine has the memory";
  }
  throw InputError(msg);
}

}  // namespace trainctl::app
