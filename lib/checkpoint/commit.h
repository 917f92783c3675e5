#pragma once
// The checkpoints/ directory protocol. A save goes to checkpoints/.tmp_step_<NNNNNNNN>/;
// when every rank's file is complete and metadata.json is written, commit_checkpoint()
// renames it to checkpoints/step_<NNNNNNNN>/, points checkpoints/latest (a text file holding
// the directory name) at it, and only then removes checkpoints beyond keep_last. A crash at
// any point leaves the previous checkpoint complete and named by `latest`; half-written
// .tmp_* directories are ignored by readers and removed by the next save.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace trainctl::checkpoint {

inline constexpr const char* kLatestFile = "latest";

// "step_00000042".
std::string step_dir_name(int64_t step);
// checkpoints_dir/.tmp_step_00000042
std::filesystem::path tmp_dir_for(const std::filesystem::path& checkpoints_dir, int64_t step);

// Creates checkpoints_dir (if needed) and an empty tmp_dir_for(step), first removing every
// leftover .tmp_* directory of an earlier crashed save. Call on ONE rank (the engine's world
// rank 0) before the others write into the returned directory.
std::filesystem::path begin_checkpoint(const std::filesystem::path& checkpoints_dir, int64_t step);

// Makes `tmp` (with its metadata.json already written) the complete checkpoint for `step`:
// fsyncs its files and the directory, renames it to checkpoints_dir/step_<step> (replacing
// an older directory of that name), atomically rewrites checkpoints_dir/latest, then removes
// all but the newest `keep_last` complete checkpoints (keep_last <= 0: keep all; the one
// just written is always kept). Returns the final directory. Throws std::runtime_error when
// `tmp` has no metadata.json.
std::filesystem::path commit_checkpoint(const std::filesystem::path& tmp,
                                        const std::filesystem::path& checkpoints_dir, int64_t step,
                                        int keep_last);

struct CheckpointEntry {
  int64_t step = 0;
  std::filesystem::path path;
};

// Complete checkpoints (step_* directories whose metadata.json parses), oldest first.
std::vector<CheckpointEntry> list_complete(const std::filesystem::path& checkpoints_dir);

// The checkpoint `latest` names if it is complete, else the newest complete one; nullopt
// when there is none.
std::optional<std::filesystem::path> latest_checkpoint(
    const std::filesystem::path& checkpoints_dir);

// A checkpoint named by the user: a step directory, a checkpoints/ directory or a run
// directory (their latest). Throws InputError saying what was found instead.
std::filesystem::path resolve_checkpoint(const std::filesystem::path& path);

// `--resume`: "none" -> nullopt; "auto" -> the latest complete checkpoint under
// checkpoints_dir, or nullopt when there is none (start from scratch); anything else is a
// path given to resolve_checkpoint (an error if it holds no checkpoint).
std::optional<std::filesystem::path> resolve_resume(const std::filesystem::path& checkpoints_dir,
                                                    const std::string& resume);

}  // namespace trainctl::checkpoint
