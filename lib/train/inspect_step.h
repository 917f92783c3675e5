#pragma once
#include <filesystem>
#include <optional>

#include "config/job_spec.h"

namespace trainctl::train {

// Runs the job's first optimizer step on one worker (first micro-batch only) and writes
// everything another implementation needs to reproduce it into out_dir:
//   weights.safetensors  initial parameters (nanoGPT names): the job's initialisation, or
//                        the parameters of checkpoint `from` (any layout) when given, else
//                        of model.init_from's Hugging Face folder when set; the
//                        optimizer starts fresh either way
//   batch.safetensors    tokens and targets [micro_batch, seq_len] (as F32)
//   grads.safetensors    gradients of the mean loss over the batch
//   updated.safetensors  parameters after clipping and one optimizer step
//   step.json            loss, gradient norm, model dims, optimizer settings
// An out_dir that cannot take these files (it is a file such as /etc/passwd, its parent is
// missing and cannot be made, it or one of the files is not writable, the file system is
// read-only) is an InputError (exit 2) naming the path and the reason, before any work.
void inspect_step(const config::JobSpec& spec, const std::filesystem::path& out_dir,
                  const std::optional<std::filesystem::path>& from = std::nullopt);

}  // namespace trainctl::train
