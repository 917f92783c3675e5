#pragma once
#include <filesystem>

#include "comm/process_groups.h"
#include "model/gpt.h"
#include "train/run_options.h"

namespace trainctl::train {

// Writes the whole model as one safetensors file with nanoGPT's names and layouts,
// assembled on world rank 0 from every (pp stage, tp rank) shard of DP replica 0
// (collective over the world group: every rank must call it; only rank 0 writes).
// lm_head.weight is not written: it is tied to transformer.wte.weight (as in nanoGPT),
// and safetensors cannot store two names for one tensor.
// `values`: the flat parameters when the model does not hold them whole (ZeRO-3 gathers
// them, Zero3Params::gather_flat); null: gpt.params().data().
void export_model(const model::Gpt& gpt, const RunOptions& options, comm::ProcessGroups& groups,
                  const std::filesystem::path& path, const float* values = nullptr);

}  // namespace trainctl::train
