#pragma once
// Which checkpoint a run resumes from, chosen on world rank 0 before any rank reads one.
// A checkpoint is either loaded exactly as it says or refused:
//  - `--resume PATH` (a step, checkpoints/ or run directory) uses that checkpoint or fails:
//    damaged, edited or incomplete is an InputError (exit 2, the launcher does not restart);
//    never an older checkpoint, never a start from scratch.
//  - `--resume auto` tries the checkpoint checkpoints/latest names, then the others newest
//    first (checkpoint/commit.h auto_resume_order), and prints a warning for every one it
//    skips and why (metadata.json missing, edited or out of range; a shard damaged; a
//    step directory that cannot be read) and for every newer one it does not use. When
//    step directories exist but none is usable it fails (exit 2) instead of starting over
//    and overwriting them; with none at all the run starts from scratch.
//  - `--resume none` starts from scratch.
// A checkpoint of another model is an error in every mode.
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "checkpoint/metadata.h"
#include "model/model_config.h"

namespace trainctl::train {

// `say`: a line for the user's console (warnings start with "warning: "). Returns the
// verified checkpoint directory, or nullopt to start from scratch.
std::optional<std::filesystem::path> choose_resume_checkpoint(
    const std::filesystem::path& checkpoints_dir, const std::string& resume,
    const model::ModelConfig& model, const std::function<void(const std::string&)>& say);

// The engine's own entries of metadata.json's "extra" (global_batch_size, loss_scale): a
// CheckpointCorrupt naming the checkpoint and the field when present but ill-typed or out of
// range.
void check_engine_extra(const checkpoint::CheckpointMetadata& meta,
                        const std::filesystem::path& dir);

}  // namespace trainctl::train
