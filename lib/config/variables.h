#pragma once
// Environment variables and `~` in job spec values (docs/job-spec.md, "Variables"):
//   ${VAR}           the variable's value; unset is an error (set it, or give a default)
//   ${VAR:-default}  the default when VAR is unset or empty (the default is expanded too)
//   $VAR             the same as ${VAR}: Slurm scripts write $SCRATCH and $SLURM_JOB_ID
//   $$               a literal `$`
// A `$` followed by anything else (a digit, a space, the end) stays as written. Values from
// the environment are not expanded again. `~` and `~/...` at the start of a path are
// $HOME; expand_home is applied to path values only (run_dir, data.path, include).
#include <yaml-cpp/yaml.h>

#include <functional>
#include <optional>
#include <string>

#include "config/locations.h"

namespace trainctl::config::detail {

// The value of an environment variable, or nullopt when it is unset.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;

// The process environment (std::getenv).
EnvLookup process_environment();

// `text` with its variables expanded; throws InputError "<problem>" (no place: the caller
// adds it) for an unset variable without a default, or a `${` that is not closed or does not
// hold a variable name.
std::string expand_variables(const std::string& text, const EnvLookup& env);

// Expands the variables of every scalar value (not the keys) under `node`, at key path
// `path`; an error names where the value is (`locations`) and its key path.
void expand_tree(YAML::Node node, const std::string& path, const EnvLookup& env,
                 const Locations& locations);

// "~" -> $HOME, "~/x" -> $HOME/x; anything else unchanged. Throws InputError (no place) when
// HOME is unset, or for `~user/...` (other users' homes are not looked up: write the path).
std::string expand_home(const std::string& path, const EnvLookup& env);

}  // namespace trainctl::config::detail
