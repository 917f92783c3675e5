#include "train/init_from_check.h"

#include "checkpoint/hf_import.h"
#include "train/spec_options.h"
#include "util/error.h"

namespace trainctl::train {

std::string check_init_from(const config::JobSpec& spec) {
  if (spec.model.init_from.empty()) return {};
  try {
    checkpoint::HfModelFolder folder(spec.model.init_from, gpt_config(spec));
    folder.check();
    return folder.summary();
  } catch (const InputError& e) {
    throw InputError(spec.where("model.init_from") + ": model.init_from: " + e.what());
  }
}

}  // namespace trainctl::train
