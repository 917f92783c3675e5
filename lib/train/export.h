#pragma once
#include <filesystem>

#include "config/job_spec.h"
#include "model/gpt.h"

namespace trainctl::train {

// Writes the model's parameters as one safetensors file with nanoGPT's names and
// layouts. lm_head.weight is not written: it is tied to transformer.wte.weight (as in
// nanoGPT), and safetensors cannot store two names for one tensor.
void export_model(const model::Gpt& gpt, const config::JobSpec& spec,
                  const std::filesystem::path& path);

}  // namespace trainctl::train
