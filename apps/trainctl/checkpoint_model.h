#pragma once
// The model (and, to resume, the optimizer state) a checkpoint holds, checked against the
// job's before any worker starts: the workers would refuse it only after starting and
// running their self-test (lib/train/resume_choice.cpp, checkpoint_restore.cpp). Layouts
// need no check: a checkpoint loads into any dp/tp/pp/ZeRO layout.
#include <filesystem>
#include <optional>
#include <string>

#include "config/job_spec.h"

namespace trainctl::app {

// Throws InputError naming dir/metadata.json, the checkpoint's model and the job's (`job`
// as the user named it), and `fix`, when they differ. CheckpointCorrupt for a metadata.json
// that does not read.
void check_checkpoint_model(const std::filesystem::path& dir, const config::JobSpec& spec,
                            const std::string& job, const std::string& fix);

// Resuming also needs the job's optimizer state (another optimizer.type wrote none): an
// InputError naming dir/metadata.json and the missing state.
void check_checkpoint_optimizer(const std::filesystem::path& dir, const config::JobSpec& spec);

// The checkpoint `train --resume` makes the workers load first: none for `none` or a run
// without checkpoints; for `auto` the first of checkpoint::auto_resume_order whose
// metadata.json reads (the workers skip damaged ones with a warning, but refuse a readable
// one of another model); else the checkpoint the path resolves to.
std::optional<std::filesystem::path> resume_candidate(const config::JobSpec& spec,
                                                      const std::string& resume);

}  // namespace trainctl::app
