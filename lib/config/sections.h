#pragma once
// The schema: which keys each section has, their types, ranges and allowed values.
#include <yaml-cpp/yaml.h>

#include "config/job_spec.h"
#include "config/locations.h"

namespace trainctl::config::detail {

// Reads the spec document into a JobSpec, checking every key on its own (type, range, enum
// value, unknown or duplicated keys) and applying `model.preset`. Cross-field rules are
// validate.h's; paths are returned as written (relative ones are resolved by the caller).
JobSpec read_job_spec(const YAML::Node& root, Locations& locations);

}  // namespace trainctl::config::detail
