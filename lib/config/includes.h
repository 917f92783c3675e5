#pragma once
// A job spec document with its variables expanded and its includes merged in
// (docs/job-spec.md, "Includes"):
//   include: base.yaml            # or a list: [model.yaml, cluster.yaml]
// at the top level of a spec reads those files first (each may include others), merges
// them in order, then the including file's own keys on top: maps (sections) merge key by
// key, any other value (a number, a string, a list) replaces the included one. An include
// path is relative to the including file's directory; `~` and variables are expanded in it.
// A cycle or a missing file is an InputError naming the include chain. Every value
// remembers the file that set it (Locations::file_of), so messages point into that file and
// its relative paths resolve against that file's directory.
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <optional>
#include <string>

#include "config/locations.h"
#include "config/variables.h"

namespace trainctl::config::detail {

struct SpecSource {
  std::string text;
  std::string name;           // as messages show it ("configs/job.yaml")
  std::filesystem::path dir;  // absolute: its relative paths and includes resolve against it
  std::optional<std::filesystem::path> file;  // the file itself (for cycles), if it is one
};

// The merged document (a map; the top-level `include` key removed). Throws InputError for
// YAML that is not one map, an unset variable, or a bad include.
YAML::Node compose_spec(const SpecSource& source, Locations& locations, const EnvLookup& env);

}  // namespace trainctl::config::detail
