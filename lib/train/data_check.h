#pragma once
// The job's data file, checked before anything starts (`validate`, `train`: before run_dir
// is created or a worker spawned) exactly as the workers will load it
// (data/file_checks.h), so bad data exits 2 up front rather than from inside a worker.
#include <string>

#include "config/job_spec.h"

namespace trainctl::train {

// Returns what `validate` prints about the file ("/x/train.bin: llm.c token file, 1000
// tokens, ids 0..299"); empty for synthetic data. Throws InputError
// "<spec>: data.path: <file>: <problem>; <fix>".
std::string check_data(const config::JobSpec& spec);

}  // namespace trainctl::train
