#include "data/manifest_dataset.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>
#include <utility>

#include "data/epoch_order.h"
#include "data/file_checks.h"
#include "util/error.h"

namespace trainctl::data {

namespace {

void check_vocab(const TokenManifest& m, const DatasetOptions& o) {
  if (m.vocab_size > o.vocab_size) {
    throw InputError((o.path / kManifestName).string() + ": the tokenizer has " +
                     std::to_string(m.vocab_size) + " tokens but model.vocab_size is " +
                     std::to_string(o.vocab_size) + "; set model.vocab_size to at least " +
                     std::to_string(m.vocab_size));
  }
}

// The shard's size, and its ids against the manifest's vocab_size (not the model's, which
// may be larger): a token the tokenizer cannot have made means the shard or the manifest was
// changed. The scan is the one opening always made (200 MB in the page cache: ~0.02 s).
uint32_t check_shard(const TokenFile& f, const ShardEntry& e, const TokenManifest& m) {
  if (static_cast<int64_t>(f.size()) != e.tokens) {
    throw InputError(f.path().string() + ": holds " + std::to_string(f.size()) +
                     " tokens but manifest.json says " + std::to_string(e.tokens) +
                     "; the directory was changed after `trainctl data prepare`: prepare it again");
  }
  const uint32_t max_id = f.max_token();
  if (max_id >= m.vocab_size) {
    throw InputError(f.path().string() + ": contains token id " + std::to_string(max_id) +
                     " but manifest.json's vocab_size is " + std::to_string(m.vocab_size) +
                     " (ids 0.." + std::to_string(m.vocab_size - 1) +
                     "); the directory was changed after `trainctl data prepare`: prepare it "
                     "again");
  }
  return max_id;
}

// Two names for one file (a link) are one shard listed twice: refused like a repeated name.
class DistinctFiles {
 public:
  void add(const std::filesystem::path& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return;  // TokenFile has opened it: not expected
    if (!seen_.emplace(st.st_dev, st.st_ino).second) {
      throw InputError(path.string() +
                       ": is the same file as another shard of manifest.json (a link); each "
                       "shard must be its own file. Prepare the directory again");
    }
  }

 private:
  std::set<std::pair<dev_t, ino_t>> seen_;
};

void check_windows(const char* split, size_t tokens, uint64_t windows, const DatasetOptions& o) {
  if (windows == 0) {
    throw InputError((o.path / kManifestName).string() + ": the " + split + " split (" +
                     std::to_string(tokens) + " tokens) has no shard of model.seq_len + 1 = " +
                     std::to_string(o.seq_len + 1) + " tokens" +
                     (std::string(split) == "val"
                          ? "; prepare with a larger --val-fraction, or set data.val_fraction: 0 "
                            "and training.eval_every: 0 to train without validation"
                          : "; use more text or a smaller model.seq_len"));
  }
}

}  // namespace

ManifestDataset::ManifestDataset(const DatasetOptions& options)
    : opt_(options), manifest_(read_manifest(options.path)) {
  check_vocab(manifest_, opt_);
  open_split(manifest_.train, train_);
  open_split(manifest_.val, val_);
  DistinctFiles distinct;
  for (const SplitFiles* split : {&train_, &val_}) {
    for (const auto& f : split->files) distinct.add(f->path());
  }
  check_windows("train", train_.tokens, train_.windows, opt_);
  if (opt_.val_fraction > 0) check_windows("val", val_.tokens, val_.windows, opt_);
}

void ManifestDataset::open_split(const std::vector<ShardEntry>& shards, SplitFiles& out) const {
  for (const ShardEntry& e : shards) {
    auto f = std::make_unique<TokenFile>(opt_.path / e.file);
    check_shard(*f, e, manifest_);
    out.first_window.push_back(out.windows);
    out.windows += sequences_in(f->size(), opt_.seq_len);
    out.tokens += f->size();
    out.files.push_back(std::move(f));
  }
}

void ManifestDataset::sample(Split split, uint64_t index, int32_t* tokens, int32_t* targets) const {
  const SplitFiles& s = split == Split::train ? train_ : val_;
  if (s.windows == 0) {
    throw InputError(opt_.path.string() + ": the validation split has no window to sample");
  }
  const uint64_t w =
      epoch_sample(index, s.windows, opt_.seed, split == Split::train ? 0x7a11 : 0x5a1d).sequence;
  const size_t f =
      static_cast<size_t>(std::upper_bound(s.first_window.begin(), s.first_window.end(), w) -
                          s.first_window.begin() - 1);
  const size_t off = static_cast<size_t>(w - s.first_window[f]) * static_cast<size_t>(opt_.seq_len);
  s.files[f]->copy(off, static_cast<size_t>(opt_.seq_len), tokens);
  s.files[f]->copy(off + 1, static_cast<size_t>(opt_.seq_len), targets);
}

std::string ManifestDataset::describe() const {
  std::ostringstream os;
  os << opt_.path.string() << " (prepared tokens, " << manifest_.tokenizer_kind << " "
     << manifest_.tokenizer_hash << ", vocab " << manifest_.vocab_size
     << "): " << train_.tokens + val_.tokens << " tokens, " << train_.tokens << " train in "
     << train_.files.size() << " files (" << train_.windows << " sequences an epoch) / "
     << val_.tokens << " validation";
  return os.str();
}

double ManifestDataset::unigram_entropy() const {
  std::vector<double> counts(static_cast<size_t>(manifest_.vocab_size), 0.0);
  for (const auto& f : train_.files) {
    for (size_t i = 0; i < f->size(); ++i) counts[f->token(i)] += 1.0;
  }
  double h = 0.0;
  const auto n = static_cast<double>(train_.tokens);
  for (double c : counts) {
    if (c > 0) h -= c / n * std::log(c / n);
  }
  return h;
}

std::string check_token_directory(const DatasetOptions& options) {
  const TokenManifest m = read_manifest(options.path);
  check_vocab(m, options);
  verified_tokenizer_file(options.path, m);
  size_t tokens[2] = {0, 0};
  uint64_t windows[2] = {0, 0};
  uint32_t max_id = 0;
  DistinctFiles distinct;
  for (int s = 0; s < 2; ++s) {
    for (const ShardEntry& e : s == 0 ? m.train : m.val) {
      const TokenFile f(options.path / e.file);
      distinct.add(f.path());
      max_id = std::max(max_id, check_shard(f, e, m));
      tokens[s] += f.size();
      windows[s] += sequences_in(f.size(), options.seq_len);
    }
  }
  check_windows("train", tokens[0], windows[0], options);
  if (options.val_fraction > 0) check_windows("val", tokens[1], windows[1], options);
  return options.path.string() + ": prepared tokens (" + m.tokenizer_kind + ", vocab " +
         std::to_string(m.vocab_size) + ", " + m.tokenizer_hash + "), " +
         std::to_string(tokens[0]) + " train in " + std::to_string(m.train.size()) + " files + " +
         std::to_string(tokens[1]) + " validation tokens, ids 0.." + std::to_string(max_id);
}

}  // namespace trainctl::data
