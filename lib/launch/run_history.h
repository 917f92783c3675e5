#pragma once
// One history per run directory (issue 37). `train --resume none` starts a run over; if
// run_dir already holds a run (checkpoints, metrics, TensorBoard events), starting over
// in place would mix two histories: metrics.jsonl truncated, old step directories beside
// new ones, TensorBoard events with overlapping steps. So the launcher refuses unless the
// user says --overwrite, which moves the old run, whole, to run_dir/previous-<UTC time>/:
// nothing is deleted, and the fresh run finds an empty run_dir.
#include <filesystem>
#include <optional>
#include <string>

namespace trainctl::launch {

// What run_dir holds of an earlier run ("3 checkpoints (newest step_00000300),
// metrics.jsonl (120 lines)"), or nothing when it holds no history: a run_dir with only a
// config, logs or a lock file left by a run that never took a step has none.
std::optional<std::string> describe_run_history(const std::filesystem::path& run_dir);

// Moves every entry of run_dir except the lock file and earlier previous-* folders into
// run_dir/previous-YYYYMMDD-HHMMSS (a suffix -2, -3 ... when that exists already) and
// returns that folder. Call only while holding run_dir's lock.
std::filesystem::path move_run_aside(const std::filesystem::path& run_dir);

// The refusal of --resume none on a run_dir with history: what it holds and the choices.
std::string run_history_refusal(const std::filesystem::path& run_dir, const std::string& history);

}  // namespace trainctl::launch
