#include "data/corpus.h"

#include <cmath>
#include <sstream>

#include "data/epoch_order.h"
#include "data/file_checks.h"
#include "util/error.h"
#include "util/random.h"
#include "util/regular_file.h"

namespace trainctl::data {

CorpusDataset::CorpusDataset(const DatasetOptions& options) : opt_(options) {
  // The same checks as the pre-launch one (data/file_checks.h), so a file that passed
  // `validate` is never refused here and a worker never maps a file `validate` refused.
  if (opt_.type == "text") {
    const RegularFile file(opt_.path, "text file (data.path)");
    const std::string bytes = file.read_all(file.size());
    owned_.resize(bytes.size());
    for (size_t i = 0; i < bytes.size(); ++i) owned_[i] = static_cast<unsigned char>(bytes[i]);
    size_ = owned_.size();
    format_ = "UTF-8 text, byte tokens";
  } else {
    file_ = std::make_unique<TokenFile>(opt_.path);
    // One pass to catch a vocabulary mismatch now rather than as garbage gradients later.
    check_token_ids(*file_, opt_.vocab_size);
    size_ = file_->size();
    format_ = file_->format() + " token file";
  }
  check_split_sizes(size_, opt_);
  train_size_ = train_split_size(size_, opt_.val_fraction);
  train_sequences_ = sequences_in(train_size_, opt_.seq_len);
  val_sequences_ = sequences_in(size_ - train_size_, opt_.seq_len);
}

void CorpusDataset::sample(Split split, uint64_t index, int32_t* tokens, int32_t* targets) const {
  const bool train = split == Split::train;
  const uint64_t n = train ? train_sequences_ : val_sequences_;
  if (n == 0) throw InputError(opt_.path.string() + ": the validation split has no sequence");
  const EpochSample e = epoch_sample(index, n, opt_.seed, train ? 0x7a11 : 0x5a1d);
  const size_t off = (train ? 0 : train_size_) + static_cast<size_t>(e.sequence) * opt_.seq_len;
  if (file_) {
    file_->copy(off, static_cast<size_t>(opt_.seq_len), tokens);
    file_->copy(off + 1, static_cast<size_t>(opt_.seq_len), targets);
    return;
  }
  for (int t = 0; t < opt_.seq_len; ++t) {
    tokens[t] = owned_[off + static_cast<size_t>(t)];
    targets[t] = owned_[off + static_cast<size_t>(t) + 1];
  }
}

std::string CorpusDataset::describe() const {
  std::ostringstream os;
  os << opt_.path.string() << " (" << format_ << "): " << size_ << " tokens, " << train_size_
     << " train (" << train_sequences_ << " sequences an epoch) / " << size_ - train_size_
     << " validation";
  return os.str();
}

double CorpusDataset::unigram_entropy() const {
  std::vector<double> counts(static_cast<size_t>(opt_.vocab_size), 0.0);
  for (size_t i = 0; i < train_size_; ++i) counts[static_cast<size_t>(token(i))] += 1.0;
  double h = 0.0;
  for (double c : counts) {
    if (c > 0) {
      const double q = c / static_cast<double>(train_size_);
      h -= q * std::log(q);
    }
  }
  return h;
}

}  // namespace trainctl::data
