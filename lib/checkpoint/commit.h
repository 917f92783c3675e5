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

// Removes every leftover .tmp_* (and trash) directory an interrupted save left in
// checkpoints_dir, returning what it removed (nothing when the directory does not exist).
// Call on ONE rank, while no save is in progress.
std::vector<std::filesystem::path> remove_leftovers(const std::filesystem::path& checkpoints_dir);
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

// One entry of checkpoints/ named step_<N>, usable or not.
struct CheckpointStatus {
  int64_t step = 0;  // N, from the name
  std::filesystem::path path;
  // Empty when metadata.json is there and every field checks (read_metadata()); else why
  // the checkpoint cannot be used, naming it. The shards are not read here: that is
  // CheckpointReader::verify()'s job.
  std::string problem;
};

// Every step_<N> entry of checkpoints_dir, newest first, each with its problem. Never throws
// for one entry: a symbolic link loop, a plain file or an unreadable directory named step_<N>
// is listed with what is wrong with it. An absent or unreadable checkpoints_dir lists nothing.
std::vector<CheckpointStatus> scan_checkpoints(const std::filesystem::path& checkpoints_dir);

// The directory name checkpoints_dir/latest holds when it is a step_<N> name, else nullopt.
std::optional<std::string> latest_name(const std::filesystem::path& checkpoints_dir);

// Complete checkpoints (step_* directories whose metadata.json checks), oldest first.
std::vector<CheckpointEntry> list_complete(const std::filesystem::path& checkpoints_dir);

// The checkpoint `latest` names if it is complete, else the newest complete one; nullopt
// when there is none.
std::optional<std::filesystem::path> latest_checkpoint(
    const std::filesystem::path& checkpoints_dir);

// The order in which `--resume auto` tries the step_<N> entries of checkpoints_dir: the one
// `latest` names first (the last checkpoint the run committed: a newer step directory may be
// left from an earlier run of the same run_dir, or from a crash between the rename and the
// update of `latest`), then every other one, newest first. Problems included: the caller
// skips those with a warning.
std::vector<CheckpointStatus> auto_resume_order(const std::filesystem::path& checkpoints_dir);

// A checkpoint named by the user: a step directory, a checkpoints/ directory or a run
// directory (the checkpoint their `latest` names, else their newest step directory). Never
// falls back to an older checkpoint: when the one chosen is unusable, throws its
// CheckpointCorrupt (naming it, and the newest usable one to give instead). Throws InputError
// saying what was found instead when the path holds no checkpoint or cannot be read (e.g. a
// symbolic link loop).
std::filesystem::path resolve_checkpoint(const std::filesystem::path& path);

// `--resume`: "none" -> nullopt; "auto" -> latest_checkpoint(checkpoints_dir), or nullopt
// when there is none (start from scratch); anything else is a path given to
// resolve_checkpoint (an error if it holds no usable checkpoint).
std::optional<std::filesystem::path> resolve_resume(const std::filesystem::path& checkpoints_dir,
                                                    const std::string& resume);

}  // namespace trainctl::checkpoint
