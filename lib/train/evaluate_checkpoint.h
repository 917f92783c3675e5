#pragma once
// `trainctl eval`: a checkpoint's validation loss on the job's data, through the normal
// launcher and workers on the job's own layout (any dp/tp/pp/ZeRO; the checkpoint is
// resharded on reading), over the same eval_batches batches training evaluates, so it equals
// the val_loss the training run logged at that step.
#include <cstdint>
#include <filesystem>
#include <string>

#include "comm/process_groups.h"
#include "config/job_spec.h"

namespace trainctl::train {

struct EvalResult {
  int64_t step = 0;            // the checkpoint's
  double loss = 0.0;           // mean nats per target token
  int64_t tokens = 0;          // target tokens evaluated
  int64_t bytes = 0;           // bytes of text those tokens stand for
  double bits_per_byte = 0.0;  // loss * tokens / (bytes * ln 2)
};

// Collective over the world group. Bytes: one per token for byte-level data (synthetic,
// text); for `data prepare` directories, the length of each target token's text under the
// tokenizer copied there (tokens of no text, e.g. <|endoftext|>, count 0 bytes).
EvalResult evaluate_checkpoint(const config::JobSpec& spec, comm::ProcessGroups& groups,
                               int local_rank, const std::string& checkpoint);

// The console line: "eval step 20: val_loss 5.4815, bits per byte 7.9081 (...)".
std::string format_eval(const EvalResult& r);

}  // namespace trainctl::train
