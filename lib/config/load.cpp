#include "config/load.h"

#include <yaml-cpp/yaml.h>

#include "config/includes.h"
#include "config/init_from.h"
#include "config/locations.h"
#include "config/overrides.h"
#include "config/sections.h"
#include "config/validate.h"
#include "config/variables.h"
#include "util/error.h"
#include "util/regular_file.h"

namespace trainctl::config {

namespace {

namespace fs = std::filesystem;

// `~` first, then the one rule for relative paths (Locations::base_dir).
fs::path resolve(const fs::path& path, const std::string& key, const detail::Locations& locations,
                 const detail::EnvLookup& env) {
  fs::path expanded;
  try {
    expanded = detail::expand_home(path.string(), env);
  } catch (const InputError& e) {
    detail::fail(locations.where(key), key, e.what());
  }
  if (expanded.is_absolute()) return expanded.lexically_normal();
  return (locations.base_dir(key) / expanded).lexically_normal();
}

JobSpec parse_source(const detail::SpecSource& source, const std::vector<std::string>& overrides) {
  const detail::EnvLookup env = detail::process_environment();
  detail::Locations locations(source.name);
  YAML::Node root = detail::compose_spec(source, locations, env);
  detail::apply_overrides(root, overrides, locations);
  JobSpec spec = detail::read_job_spec(root, locations);

  if (!spec.data.path.empty())
    spec.data.path = resolve(spec.data.path, "data.path", locations, env);
  if (!spec.model.init_from.empty()) {
    spec.model.init_from = resolve(spec.model.init_from, "model.init_from", locations, env);
    detail::apply_init_from(spec.model, locations);
  }
  for (size_t i = 0; i < spec.data.sources.size(); ++i) {
    const std::string key = "data.sources[" + std::to_string(i) + "].path";
    spec.data.sources[i].path = resolve(spec.data.sources[i].path, key, locations, env);
  }
  // The default run_dir is next to the spec that was run (not an included file).
  spec.run_dir = spec.run_dir.empty() ? (source.dir / "runs" / spec.name).lexically_normal()
                                      : resolve(spec.run_dir, "run_dir", locations, env);

  detail::validate_job_spec(spec, locations);
  for (const char* key :
       {"model.vocab_size", "data.path", "model.init_from", "runtime.fault_tolerance.replay"}) {
    spec.key_origins[key] = locations.where(key);
  }
  for (size_t i = 0; i < spec.data.sources.size(); ++i) {
    const std::string key = "data.sources[" + std::to_string(i) + "].path";
    spec.key_origins[key] = locations.where(key);
  }
  return spec;
}

}  // namespace

JobSpec parse_job_spec(const std::string& yaml_text, const std::string& origin,
                       const fs::path& base_dir, const std::vector<std::string>& overrides) {
  const fs::path base = base_dir.empty() ? fs::current_path() : fs::absolute(base_dir);
  return parse_source({yaml_text, origin, base, std::nullopt}, overrides);
}

JobSpec load_job_spec(const fs::path& file, const std::vector<std::string>& overrides) {
  const RegularFile spec_file(file, "job spec file");
  const std::string text = spec_file.read_all(kMaxSpecBytes);
  const fs::path base =
      file.parent_path().empty() ? fs::current_path() : fs::absolute(file.parent_path());
  JobSpec spec = parse_source({text, file.string(), base, file}, overrides);
  spec.spec_path = fs::absolute(file).lexically_normal();
  return spec;
}

}  // namespace trainctl::config
