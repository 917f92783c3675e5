#pragma once
// A directory prepared by `trainctl data prepare` (data/manifest.h) as a dataset: the
// training and validation splits are the manifest's shard lists (data.val_fraction is not
// used: the split was made when the data was prepared). Each shard is cut into sequences of
// seq_len + 1 tokens starting every seq_len tokens (sequences never span two files), and
// sample i of a split is sequence epoch_sample(i) of all the split's sequences
// (data/epoch_order.h): every sequence once per epoch, each epoch in a new order from
// (seed, epoch).
#include <memory>
#include <vector>

#include "data/dataset.h"
#include "data/manifest.h"
#include "data/token_file.h"

namespace trainctl::data {

class ManifestDataset : public Dataset {
 public:
  explicit ManifestDataset(const DatasetOptions& options);
  void sample(Split split, uint64_t index, int32_t* tokens, int32_t* targets) const override;
  std::string describe() const override;
  double unigram_entropy() const override;
  uint64_t epoch_size() const override { return train_.windows; }

 private:
  struct SplitFiles {
    std::vector<std::unique_ptr<TokenFile>> files;
    std::vector<uint64_t> first_window;  // prefix sums of each file's sequence count
    uint64_t windows = 0;
    size_t tokens = 0;
  };
  void open_split(const std::vector<ShardEntry>& shards, SplitFiles& out) const;

  DatasetOptions opt_;
  TokenManifest manifest_;
  SplitFiles train_, val_;
};

// The checks ManifestDataset makes, without keeping the files open (data/file_checks.h):
// the manifest (data/manifest.h), every shard's structure and token count, each shard its
// own file (no two names for one file), ids below the manifest's vocab_size (one scan of
// each shard, which opening always made), and windows of seq_len + 1 tokens in the training
// split (and in the validation split when val_fraction > 0); and, only here, that the
// tokenizer files still hash to the manifest's (verified_tokenizer_file). Returns the line
// `validate` prints.
std::string check_token_directory(const DatasetOptions& options);

}  // namespace trainctl::data
