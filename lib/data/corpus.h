#pragma once
#include <memory>
#include <vector>

#include "data/dataset.h"
#include "data/token_file.h"

namespace trainctl::data {

// A token corpus (a byte-level UTF-8 text file, or a token file) split into a training
// head and a validation tail. Each split is cut into sequences of seq_len + 1 tokens that
// start every seq_len tokens (sequence k: tokens [k*seq_len, k*seq_len + seq_len]; the
// last token of one is the first of the next, as in nanoGPT and Megatron), and sample i is
// sequence epoch_sample(i) of data/epoch_order.h: each epoch sees every sequence once in a
// new order from (seed, epoch); the next epoch starts right after the last sequence.
class CorpusDataset : public Dataset {
 public:
  explicit CorpusDataset(const DatasetOptions& options);
  void sample(Split split, uint64_t index, int32_t* tokens, int32_t* targets) const override;
  std::string describe() const override;
  double unigram_entropy() const override;
  uint64_t epoch_size() const override { return train_sequences_; }

 private:
  DatasetOptions opt_;
  std::unique_ptr<TokenFile> file_;  // tokens datasets
  std::vector<int32_t> owned_;       // text datasets: bytes as tokens
  size_t size_ = 0;
  size_t train_size_ = 0;
  uint64_t train_sequences_ = 0, val_sequences_ = 0;
  std::string format_;

  int32_t token(size_t i) const {
    return file_ ? static_cast<int32_t>(file_->token(i)) : owned_[i];
  }
};

}  // namespace trainctl::data
