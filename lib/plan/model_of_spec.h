#pragma once
// The model's shape as lib/model describes it, from the job spec's model section (what the
// engine builds; train/spec_options.h does the same for the worker, which plan/ does not
// depend on).
#include "config/job_spec.h"
#include "model/gpt.h"

namespace trainctl::plan {

model::ModelConfig model_config_of(const config::ModelSpec& m);

// parallel.stage_balance / layers_per_stage as the model's partition takes them.
model::StageSplit stage_split_of(const config::ParallelSpec& p);

}  // namespace trainctl::plan
