#pragma once
// Datasets produce training samples as a pure function of (split, sample index), so a
// step's batch can be rebuilt anywhere: on another DP rank, after a restart, on another
// layout. Samples are windows of seq_len + 1 tokens: inputs and next-token targets.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace trainctl::data {

enum class Split { train, val };

// One source of a blend (data/blend.h).
struct BlendSourceOptions {
  std::string name;
  std::string type = "tokens";  // text | tokens
  std::filesystem::path path;
  double weight = 0.0;
};

struct DatasetOptions {
  std::string type = "synthetic";           // synthetic | text | tokens | blend
  std::filesystem::path path;               // text / tokens (a file, or a `data prepare` directory)
  std::vector<BlendSourceOptions> sources;  // blend
  uint64_t blend_seed = 0;                  // blend: the schedule's seed
  double val_fraction = 0.05;               // tail of the corpus held out for validation
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
  // Training samples in one epoch (data/epoch_order.h): sample i is of epoch
  // i / epoch_size(). 0 for data without an end (synthetic: every index is generated).
  virtual uint64_t epoch_size() const { return 0; }
};

// Throws trainctl::InputError for missing/unreadable/ill-formed files, with the path.
std::unique_ptr<Dataset> make_dataset(const DatasetOptions& options);

}  // namespace trainctl::data
