#pragma once
// The blocks of each pipeline stage and its estimated forward cost, as `validate` and `plan`
// print them (parallel.stage_balance / layers_per_stage, model/shard.h).
#include <string>

#include "config/job_spec.h"

namespace trainctl::app {

// One line per pipeline stage (its chunks' blocks, the embedding and LM head where they
// live, its cost in units of one block's forward) and how far the slowest stage is above
// the mean. Throws InputError where the split cannot be made.
std::string stage_layers_text(const config::JobSpec& spec);

}  // namespace trainctl::app
