#include "train/data_check.h"

#include "data/file_checks.h"
#include "data/manifest.h"
#include "train/spec_options.h"
#include "util/error.h"

namespace trainctl::train {

std::string check_data(const config::JobSpec& spec) {
  std::string too_small;  // a prepared directory's tokenizer that does not fit the model
  std::string line;
  try {
    if (spec.data.type == "tokens" && data::is_token_directory(spec.data.path)) {
      const data::TokenManifest m = data::read_manifest(spec.data.path);
      if (m.vocab_size > spec.model.vocab_size) {
        too_small = "is " + std::to_string(spec.model.vocab_size) +
                    " but the tokenizer of data.path (" + spec.data.path.string() + ", " +
                    m.tokenizer_kind + ") has " + std::to_string(m.vocab_size) +
                    " tokens; set model.vocab_size to at least " + std::to_string(m.vocab_size) +
                    ".";
      }
    }
    if (too_small.empty()) line = data::check_dataset_file(dataset_options(spec));
  } catch (const InputError& e) {
    const std::string where =
        spec.spec_path.empty() ? std::string("job spec") : spec.spec_path.string();
    throw InputError(where + ": data.path: " + e.what());
  }
  // Outside the try: it points at model.vocab_size (file:line), not at data.path.
  if (!too_small.empty()) {
    throw InputError(spec.where("model.vocab_size") + ": model.vocab_size: " + too_small);
  }
  return line;
}

}  // namespace trainctl::train
