#pragma once
// Reading a job spec: the only place YAML exists. Everything is checked here, before any
// worker is spawned; every problem is an InputError (exit code 2 at the CLI) whose message
// names the place (`job.yaml:7:7` or `--set parallel.tp=3`), the key path, what is wrong
// and what would fix it:
//   job.yaml:7:7: parallel.tp: must divide model.n_head (6); got 4. Use tp in {1, 2, 3, 6}.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "config/job_spec.h"

namespace trainctl::config {

// A job spec is a small YAML file; anything larger is the wrong file (or a generated one
// gone wrong), and reading it whole would only cost memory and time.
inline constexpr uint64_t kMaxSpecBytes = 1024 * 1024;

// Parses and validates the spec file, applying `overrides` ("key.path=value", the value read
// as YAML: `optimizer.betas=[0.9,0.99]`) exactly as if they were in the file. Files named by
// `include:` are merged in first and environment variables expanded (config/includes.h,
// config/variables.h). One rule for relative paths (`run_dir`, `data.path`, after `~`): a
// value from a file is resolved against the directory of the file that set it, a value from
// an override against the current directory (where the user typed it). `run_dir` defaults
// to `runs/<name>` next to the spec. The result has absolute paths and spec_path set.
// The file must be a regular file of at most kMaxSpecBytes (a FIFO, a device such as
// /dev/zero or a directory is refused without reading it), else InputError.
JobSpec load_job_spec(const std::filesystem::path& file,
                      const std::vector<std::string>& overrides = {});

// The same for an in-memory document: `origin` names it in messages, `base_dir` resolves
// its relative paths. spec_path is left empty.
JobSpec parse_job_spec(const std::string& yaml_text, const std::string& origin,
                       const std::filesystem::path& base_dir,
                       const std::vector<std::string>& overrides = {});

// The resolved spec as YAML: every key, defaults filled in, absolute paths (the launcher
// writes it to run_dir/config.resolved.yaml). parse_job_spec(to_yaml(s), ...) == s.
std::string to_yaml(const JobSpec& spec);

// Human-readable lines for `trainctl validate`: layout, model size and parameter count,
// batch arithmetic, tokens per step, pipeline bubble, a per-worker memory estimate.
std::string summary(const JobSpec& spec);

}  // namespace trainctl::config
