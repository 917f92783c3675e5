#include "run_tokenizer.h"

#include <cstdio>

#include "config/load.h"
#include "data/manifest.h"
#include "util/error.h"

namespace trainctl::app {

namespace fs = std::filesystem;

fs::path run_dir_of(const fs::path& step_dir) {
  const fs::path checkpoints = step_dir.parent_path();
  if (checkpoints.filename() != "checkpoints") return {};
  return checkpoints.parent_path();
}

fs::path tokenizer_of_run(const fs::path& run_dir) {
  const fs::path resolved = run_dir / "config.resolved.yaml";
  std::error_code ec;
  if (run_dir.empty() || !fs::exists(resolved, ec)) return {};
  try {
    const config::JobSpec spec = config::load_job_spec(resolved);
    if (spec.data.type != "tokens" || !data::is_token_directory(spec.data.path)) return {};
    const data::TokenManifest m = data::read_manifest(spec.data.path);
    if (m.tokenizer_files.empty()) return {};
    return spec.data.path / m.tokenizer_files.front();
  } catch (const InputError& e) {
    std::fprintf(stderr, "note: no tokenizer found for the run: %s\n", e.what());
    return {};
  }
}

}  // namespace trainctl::app
