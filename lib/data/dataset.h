#pragma once
// Datasets produce training samples as a pure function of (split, sample index), so a
// step's batch can be rebuilt anywhere: on another DP rank, after a restart, on another
// layout. Samples are windows of seq_len + 1 tokens: inputs and next-token targets.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

namespace trainctl::data {

enum class Split { train, val };

struct DatasetOptions {
  std::string type = "synthetic";  // synthetic | text | tokens
  std::filesystem::path path;      // text / tokens (a file, or a `data prepare` directory)
  double val_fraction = 0.05;      // tail of the corpus held out for validation
  uint64_t seed = 0;
  int vocab_size = 256;
  int seq_len = 128;
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  // Writes seq_len inputs and seq_len targets for sample `index` of `split`.
  virtual void sample(Split split, uint64_t index, int32_t* tokens, int32_t* targets) const = 0;
  // One line for logs: what was loaded, how many tokens, the split sizes.
  virtual std::string describe() const = 0;
  // The lowest achievable mean loss (nats/token) if known (synthetic data), else NaN.
  virtual double best_loss() const;
  // The entropy of the training split's unigram distribution (nats/token): the loss of a
  // model that learned token frequencies only. A trained model must go well below it.
  virtual double unigram_entropy() const = 0;
};

// Throws trainctl::InputError for missing/unreadable/ill-formed files, with the path.
std::unique_ptr<Dataset> make_dataset(const DatasetOptions& options);

}  // namespace trainctl::data
