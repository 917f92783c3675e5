#pragma once
// Where a checkpoint's run keeps its tokenizer: the copy `trainctl data prepare` left next
// to the run's prepared data (run_dir/config.resolved.yaml: data {type: tokens, path: DIR}).
#include <filesystem>

namespace trainctl::app {

// The run directory of a step directory (run_dir/checkpoints/step_N), or empty.
std::filesystem::path run_dir_of(const std::filesystem::path& step_dir);

// The tokenizer file of the run's prepared data, or empty when the run trained on bytes or
// pre-tokenized files without a manifest (a note on stderr when the spec cannot be read).
// InputError when the tokenizer's files no longer hash to the manifest's record.
std::filesystem::path tokenizer_of_run(const std::filesystem::path& run_dir);

}  // namespace trainctl::app
