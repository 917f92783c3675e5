#include "train/data_check.h"

#include "data/file_checks.h"
#include "train/spec_options.h"
#include "util/error.h"

namespace trainctl::train {

std::string check_data(const config::JobSpec& spec) {
  try {
    return data::check_dataset_file(dataset_options(spec));
  } catch (const InputError& e) {
    const std::string where =
        spec.spec_path.empty() ? std::string("job spec") : spec.spec_path.string();
    throw InputError(where + ": data.path: " + e.what());
  }
}

}  // namespace trainctl::train
