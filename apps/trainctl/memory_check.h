#pragma once
// The memory plan on the command line: the per-rank table `validate` and `plan` print, and
// the check that refuses a job whose estimate exceeds runtime.memory_limit_mb before
// anything is spawned (plan/memory_plan.h says what is estimated).
#include <string>

#include "config/job_spec.h"

namespace trainctl::app {

// The memory one rank may use, in bytes, and in `source` where it came from:
// runtime.memory_limit_mb; else for device: cuda the GPU's memory (`device_memory_bytes`,
// the cluster file's device.memory_gb under `plan --cluster`, else the first visible GPU's;
// none without either); else this node's memory divided by the workers on it. 0: no limit.
double memory_limit_bytes(const config::JobSpec& spec, int workers_per_node, std::string* source,
                          double device_memory_bytes = 0);

// The per-rank table and the limit; over the limit, the changes that would lower the
// estimate, each with its new estimate.
std::string memory_text(const config::JobSpec& spec, int workers_per_node,
                        double device_memory_bytes = 0);

// Throws InputError (exit 2) when the largest rank's estimate exceeds the limit: the
// breakdown, and each single change that lowers the estimate with its new estimate.
void check_memory_fits(const config::JobSpec& spec, int workers_per_node);

}  // namespace trainctl::app
