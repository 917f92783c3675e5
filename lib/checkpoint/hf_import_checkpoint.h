#pragma once
// `trainctl ckpt import`: a Hugging Face model folder (checkpoint/hf_import.h) as a trainctl
// checkpoint at step 0: the model's parameters (one rank's file, layout 1 x 1 x 1; the
// reader reshards it onto any layout), no optimizer state, the data stream at its start.
// `trainctl train JOB --resume CKPT` starts from it with a fresh optimizer; `ckpt info`,
// `verify` and `export` read it like any other checkpoint.
#include <cstdint>
#include <filesystem>

#include "checkpoint/hf_import.h"

namespace trainctl::checkpoint {

struct ImportSummary {
  int tensors = 0;
  int64_t parameters = 0;
  uint64_t bytes = 0;
};

// Writes the checkpoint into `out` (created; it must not exist or be empty), first into a
// temporary sibling that is renamed into place when complete. The folder is check()ed first.
// The whole model passes through memory once (one process, no shards to split it into).
ImportSummary write_imported_checkpoint(const HfModelFolder& folder,
                                        const model::ModelConfig& config,
                                        const std::filesystem::path& out);

}  // namespace trainctl::checkpoint
