#pragma once
#include <memory>
#include <vector>

#include "data/dataset.h"
#include "data/token_file.h"

namespace trainctl::data {

// A token corpus (a byte-level UTF-8 text file, or a token file) split into a training
// head and a validation tail. Sample i of a split is the window starting at an offset
// drawn from hash(seed, split, i): random access without shuffling state.
class CorpusDataset : public Dataset {
 public:
  explicit CorpusDataset(const DatasetOptions& options);
  void sample(Split split, uint64_t index, int32_t* tokens, int32_t* targets) const override;
  std::string describe() const override;
  double unigram_entropy() const override;

 private:
  DatasetOptions opt_;
  std::unique_ptr<TokenFile> file_;  // tokens datasets
  std::vector<uint16_t> owned_;      // text datasets: bytes as tokens
  const uint16_t* tokens_ = nullptr;
  size_t size_ = 0;
  size_t train_size_ = 0;
  std::string format_;
};

}  // namespace trainctl::data
