#pragma once
// The job spec flows into the model, data and optimizer layers' own option structs here,
// once: those layers never see config::JobSpec.
#include "config/job_spec.h"
#include "data/dataset.h"
#include "model/gpt_config.h"
#include "ops/backend.h"
#include "optim/loss_scaler.h"
#include "optim/optimizer.h"

namespace trainctl::train {

model::GptConfig gpt_config(const config::JobSpec& spec);
data::DatasetOptions dataset_options(const config::JobSpec& spec);
optim::OptimizerOptions optimizer_options(const config::JobSpec& spec);
// Threads and the matrix-product type (precision.compute) of this worker's backend.
ops::BackendOptions backend_options(const config::JobSpec& spec);
// Dynamic loss scaling, for precision.compute: fp16 only.
optim::LossScalerOptions loss_scaler_options(const config::JobSpec& spec);

}  // namespace trainctl::train
