#pragma once
// Named model sizes (`model.preset`). A preset fills the model's dimensions; dimensions
// given explicitly next to a preset override the preset's.
#include <optional>
#include <string>
#include <vector>

#include "config/job_spec.h"

namespace trainctl::config {

// gpt-tiny, gpt-small, gpt2-124m, llama-tiny, llama-small, llama2-7b, llama3-8b (in that
// order). A llama preset also sets model.type: llama.
const std::vector<std::string>& preset_names();

// The model spec of preset `name` (its `preset` field set), or nullopt if there is none.
std::optional<ModelSpec> find_preset(const std::string& name);

}  // namespace trainctl::config
