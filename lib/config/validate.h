#pragma once
// Cross-field rules of the job spec: everything that must hold between keys before any
// worker is spawned (divisibility for TP, batch arithmetic, schedule bounds, data files).
#include <string>

#include "config/job_spec.h"
#include "config/locations.h"

namespace trainctl::config::detail {

// `spec` has absolute paths. Throws InputError pointing at the key most likely wrong.
void validate_job_spec(const JobSpec& spec, const Locations& locations);
// parallel.cp's rules (config/validate_context_parallel.cpp); called by validate_job_spec.
void check_context_parallel(const JobSpec& spec, const Locations& locations);
// parallel.sequence_parallel's rules (config/validate_sequence_parallel.cpp).
void check_sequence_parallel(const JobSpec& spec, const Locations& locations);
// parallel.stage_balance / layers_per_stage (config/validate_stage_split.cpp).
void check_stage_split(const JobSpec& spec, const Locations& locations);
// "{1, 2, 3, 6}": the values that would satisfy a divisibility rule (n's divisors).
std::string divisors_of(long long n);

}  // namespace trainctl::config::detail
