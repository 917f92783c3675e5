#include "data/dataset.h"

#include <limits>

#include "data/blend.h"
#include "data/corpus.h"
#include "data/manifest.h"
#include "data/manifest_dataset.h"
#include "data/synthetic.h"
#include "util/error.h"

namespace trainctl::data {

double Dataset::best_loss() const { return std::numeric_limits<double>::quiet_NaN(); }

std::unique_ptr<Dataset> make_dataset(const DatasetOptions& options) {
  if (options.type == "synthetic") return std::make_unique<SyntheticDataset>(options);
  if (options.type == "blend") return std::make_unique<BlendDataset>(options);
  if (options.type == "tokens" && is_token_directory(options.path)) {
    return std::make_unique<ManifestDataset>(options);
  }
  if (options.type == "text" || options.type == "tokens") {
    return std::make_unique<CorpusDataset>(options);
  }
  throw InputError("data.type: unknown dataset type '" + options.type +
                   "'; use synthetic, text, tokens or blend");
}

}  // namespace trainctl::data
