#include "run_tokenizer.h"

#include <cstdio>

#include "config/load.h"
#include "data/blend.h"
#include "data/manifest.h"
#include "train/spec_options.h"
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
  data::TokenManifest m;
  fs::path dir;
  try {
    const config::JobSpec spec = config::load_job_spec(resolved);
    dir = data::prepared_directory(train::dataset_options(spec));
    if (dir.empty()) return {};
    m = data::read_manifest(dir);
  } catch (const InputError& e) {
    std::fprintf(stderr, "note: no tokenizer found for the run: %s\n", e.what());
    return {};
  }
  // Outside the try: a tokenizer replaced since `data prepare` is an error, not a note.
  return data::verified_tokenizer_file(dir, m);
}

}  // namespace trainctl::app
