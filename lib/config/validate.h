#pragma once
// Cross-field rules of the job spec: everything that must hold between keys before any
// worker is spawned (divisibility for TP, batch arithmetic, schedule bounds, data files).
#include "config/job_spec.h"
#include "config/locations.h"

namespace trainctl::config::detail {

// `spec` has absolute paths. Throws InputError pointing at the key most likely wrong.
void validate_job_spec(const JobSpec& spec, const Locations& locations);
// parallel.cp's rules (config/validate_context_parallel.cpp); called by validate_job_spec.
void check_context_parallel(const JobSpec& spec, const Locations& locations);

}  // namespace trainctl::config::detail
