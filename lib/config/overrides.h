#pragma once
// `--set key.path=value` command-line overrides, applied to the parsed document before it is
// read, so an overridden value goes through exactly the checks a file value does.
#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "config/locations.h"

namespace trainctl::config::detail {

// Parses each "a.b.c=value" (the value as YAML, so `[0.9, 0.99]` is a list; its variables
// expanded as in a file, config/variables.h) and sets it in
// `root` (a map), creating missing sections. Records each in `locations` so later messages
// about these values name the `--set` argument. Throws InputError for a malformed argument,
// a value that is not YAML, or a path that runs through a plain value.
void apply_overrides(YAML::Node& root, const std::vector<std::string>& overrides,
                     Locations& locations);

}  // namespace trainctl::config::detail
