#include "config/load.h"

#include <yaml-cpp/yaml.h>

#include "config/locations.h"
#include "config/overrides.h"
#include "config/sections.h"
#include "config/validate.h"
#include "config/yaml_documents.h"
#include "util/error.h"
#include "util/regular_file.h"

namespace trainctl::config {

namespace {

namespace fs = std::filesystem;

std::string place(const std::string& origin, const YAML::Mark& mark) {
  if (mark.is_null()) return origin;
  return origin + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
}

YAML::Node parse_document(const std::string& yaml_text, const std::string& origin) {
  YAML::Node document;
  try {
    // Counted first, without LoadAll (yaml_documents.h: it can loop forever).
    const detail::DocumentCount count = detail::count_yaml_documents(yaml_text);
    if (count.documents > 1) {
      throw InputError(place(origin, count.second.value_or(YAML::Mark::null_mark())) +
                       ": a second YAML document starts here; a job spec is one document. Remove "
                       "the `---` separator and what follows, or text left after the spec (such "
                       "as a stray `,`).");
    }
    document = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    // yaml-cpp reports where it noticed the problem, which is often the line after the
    // real mistake (an unclosed bracket, a key indented differently from its siblings).
    throw InputError(place(origin, e.mark) + ": invalid YAML: " + e.msg +
                     ". Check this line and the one before it: keys of one section need the "
                     "same indentation, and every [ or { needs its closing ] or }.");
  }
  if (document.IsNull()) {
    throw InputError(origin + ": the job spec is empty; see configs/quickstart.yaml for a start.");
  }
  if (!document.IsMap()) {
    const YAML::Mark m = document.Mark();
    throw InputError(place(origin, m) +
                     ": the job spec must be a map of sections (`model:`, `training:`, ...).");
  }
  return document;
}

fs::path resolve(const fs::path& path, const fs::path& base) {
  return (path.is_absolute() ? path : base / path).lexically_normal();
}

}  // namespace

JobSpec parse_job_spec(const std::string& yaml_text, const std::string& origin,
                       const fs::path& base_dir, const std::vector<std::string>& overrides) {
  detail::Locations locations(origin);
  YAML::Node root = parse_document(yaml_text, origin);
  detail::apply_overrides(root, overrides, locations);
  JobSpec spec = detail::read_job_spec(root, locations);

  const fs::path base = base_dir.empty() ? fs::current_path() : fs::absolute(base_dir);
  const fs::path cwd = fs::current_path();
  auto base_for = [&](const std::string& key) { return locations.from_override(key) ? cwd : base; };
  if (!spec.data.path.empty()) spec.data.path = resolve(spec.data.path, base_for("data.path"));
  spec.run_dir = spec.run_dir.empty() ? resolve(fs::path("runs") / spec.name, base)
                                      : resolve(spec.run_dir, base_for("run_dir"));

  detail::validate_job_spec(spec, locations);
  return spec;
}

JobSpec load_job_spec(const fs::path& file, const std::vector<std::string>& overrides) {
  const RegularFile spec_file(file, "job spec file");
  const std::string text = spec_file.read_all(kMaxSpecBytes);
  JobSpec spec = parse_job_spec(text, file.string(), file.parent_path(), overrides);
  spec.spec_path = fs::absolute(file).lexically_normal();
  return spec;
}

}  // namespace trainctl::config
