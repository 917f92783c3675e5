#pragma once
// The memory plan on the command line: the per-rank table `validate` and `plan` print, and
// the check that refuses a job whose estimate exceeds runtime.memory_limit_mb before
// anything is spawned (plan/memory_plan.h says what is estimated).
#include <string>

#include "config/job_spec.h"

namespace trainctl::app {

// runtime.memory_limit_mb in bytes, or by default this node's memory divided by the
// workers on it (device: cuda without a limit in the spec: 0, no check). `source` says
// where it came from.
double memory_limit_bytes(const config::JobSpec& spec, int workers_per_node, std::string* source);

// The per-rank table and the limit.
std::string memory_text(const config::JobSpec& spec, int workers_per_node);

// Throws InputError (exit 2) when the largest rank's estimate exceeds the limit: the
// breakdown, and each single change that lowers the estimate with its new estimate.
void check_memory_fits(const config::JobSpec& spec, int workers_per_node);

}  // namespace trainctl::app
