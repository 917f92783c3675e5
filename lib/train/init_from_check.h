#pragma once
// model.init_from's folder, checked before anything starts (`validate`, `train`) exactly as
// the workers will read it (checkpoint/hf_import.h): every shard present, every tensor of
// the model there with its shape and an accepted dtype. Bad input exits 2 up front.
#include <string>

#include "config/job_spec.h"

namespace trainctl::train {

// Returns what `validate` prints ("/x/gpt2: 27 tensors in 4 files, F32"); empty without
// model.init_from. Throws InputError "<spec>: model.init_from: <file>: <problem>".
std::string check_init_from(const config::JobSpec& spec);

}  // namespace trainctl::train
