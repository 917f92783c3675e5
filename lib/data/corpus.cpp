#include "data/corpus.h"

#include <cmath>
#include <fstream>
#include <iterator>
#include <sstream>

#include "util/error.h"
#include "util/random.h"

namespace trainctl::data {

CorpusDataset::CorpusDataset(const DatasetOptions& options) : opt_(options) {
  const std::string p = opt_.path.string();
  if (opt_.type == "text") {
    std::ifstream in(opt_.path, std::ios::binary);
    if (!in) throw InputError(p + ": cannot open text file (data.path)");
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    owned_.reserve(bytes.size());
    for (char c : bytes) owned_.push_back(static_cast<unsigned char>(c));
    tokens_ = owned_.data();
    size_ = owned_.size();
    format_ = "UTF-8 text, byte tokens";
  } else {
    file_ = std::make_unique<TokenFile>(opt_.path);
    tokens_ = file_->tokens();
    size_ = file_->size();
    format_ = file_->format() + " token file";
    // One pass to catch a vocabulary mismatch now rather than as garbage gradients later.
    uint16_t max_token = 0;
    for (size_t i = 0; i < size_; ++i) max_token = std::max(max_token, tokens_[i]);
    if (max_token >= opt_.vocab_size) {
      throw InputError(p + ": contains token id " + std::to_string(max_token) +
                       " but model.vocab_size is " + std::to_string(opt_.vocab_size) +
                       "; set model.vocab_size to at least " + std::to_string(max_token + 1));
    }
  }
  train_size_ = static_cast<size_t>(static_cast<double>(size_) * (1.0 - opt_.val_fraction));
  const size_t window = static_cast<size_t>(opt_.seq_len) + 1;
  if (train_size_ < window || (opt_.val_fraction > 0 && size_ - train_size_ < window)) {
    throw InputError(p + ": " + std::to_string(size_) + " tokens are too few for windows of " +
                     std::to_string(window) + " tokens in both splits (val_fraction " +
                     std::to_string(opt_.val_fraction) +
                     "); use a larger corpus or a smaller model.seq_len");
  }
}

void CorpusDataset::sample(Split split, uint64_t index, int32_t* tokens, int32_t* targets) const {
  const size_t window = static_cast<size_t>(opt_.seq_len) + 1;
  size_t begin = 0, len = train_size_;
  if (split == Split::val) {
    begin = train_size_;
    len = size_ - train_size_;
  }
  const uint64_t h = rng::hash(opt_.seed, split == Split::train ? 0x7a11 : 0x5a1d, index);
  const size_t off = begin + static_cast<size_t>(h % (len - window + 1));
  for (int t = 0; t < opt_.seq_len; ++t) {
    tokens[t] = tokens_[off + static_cast<size_t>(t)];
    targets[t] = tokens_[off + static_cast<size_t>(t) + 1];
  }
}

std::string CorpusDataset::describe() const {
  std::ostringstream os;
  os << opt_.path.string() << " (" << format_ << "): " << size_ << " tokens, " << train_size_
     << " train / " << size_ - train_size_ << " validation";
  return os.str();
}

double CorpusDataset::unigram_entropy() const {
  std::vector<double> counts(65536, 0.0);
  for (size_t i = 0; i < train_size_; ++i) counts[tokens_[i]] += 1.0;
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
