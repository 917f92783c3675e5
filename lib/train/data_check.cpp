#include "train/data_check.h"

#include <filesystem>

#include "data/blend.h"
#include "data/file_checks.h"
#include "data/manifest.h"
#include "train/spec_options.h"
#include "util/error.h"

namespace trainctl::train {

namespace {

// Each source of a blend as its own dataset; errors name the source's key and file.
std::string check_blend(const config::JobSpec& spec) {
  const data::DatasetOptions blend = dataset_options(spec);
  std::string lines, tokenizer, tokenizer_source;
  for (size_t k = 0; k < blend.sources.size(); ++k) {
    const std::string key = "data.sources[" + std::to_string(k) + "].path";
    try {
      const data::DatasetOptions o = data::source_options(blend, k);
      if (o.type == "tokens" && data::is_token_directory(o.path)) {
        const data::TokenManifest m = data::read_manifest(o.path);
        if (m.vocab_size > spec.model.vocab_size) {
          throw InputError(o.path.string() + ": its tokenizer has " + std::to_string(m.vocab_size) +
                           " tokens but model.vocab_size is " +
                           std::to_string(spec.model.vocab_size) +
                           "; set model.vocab_size to at least " + std::to_string(m.vocab_size));
        }
        // One vocabulary for the whole blend: the same id must mean the same token.
        if (!tokenizer.empty() && m.tokenizer_hash != tokenizer) {
          throw InputError(o.path.string() + ": was prepared with tokenizer " + m.tokenizer_hash +
                           " but " + tokenizer_source + " with " + tokenizer +
                           "; prepare every source of a blend with the same tokenizer");
        }
        tokenizer = m.tokenizer_hash;
        tokenizer_source = o.path.string();
      }
      lines +=
          (lines.empty() ? "" : "\n") + blend.sources[k].name + ": " + data::check_dataset_file(o);
    } catch (const InputError& e) {
      throw InputError(spec.where(key) + ": " + key + ": " + e.what());
    }
  }
  return lines;
}

}  // namespace

std::string check_data(const config::JobSpec& spec) {
  // runtime.fault_tolerance.replay: the membership record a run replays, read by every
  // worker at start.
  const config::FaultToleranceSpec& ft = spec.runtime.fault_tolerance;
  std::error_code ec;
  if (ft.enabled && !ft.replay.empty() && !std::filesystem::is_regular_file(ft.replay, ec)) {
    throw InputError(spec.where("runtime.fault_tolerance.replay") +
                     ": runtime.fault_tolerance.replay: no such file: " + ft.replay +
                     " (replay takes a fault-tolerant run's run_dir/membership.jsonl; paths "
                     "are relative to this spec's directory)");
  }
  if (spec.data.type == "blend") return check_blend(spec);
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
