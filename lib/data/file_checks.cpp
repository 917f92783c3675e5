#include "data/file_checks.h"

#include "data/manifest.h"
#include "data/manifest_dataset.h"
#include "util/error.h"
#include "util/regular_file.h"

namespace trainctl::data {

uint32_t check_token_ids(const TokenFile& file, int vocab_size) {
  const uint32_t max_token = file.max_token();
  if (max_token >= static_cast<uint32_t>(vocab_size)) {
    throw InputError(file.path().string() + ": contains token id " + std::to_string(max_token) +
                     " but model.vocab_size is " + std::to_string(vocab_size) +
                     "; set model.vocab_size to at least " +
                     std::to_string(uint64_t{max_token} + 1) +
                     ", or tokenize with the model's vocabulary");
  }
  return max_token;
}

size_t train_split_size(size_t tokens, double val_fraction) {
  return static_cast<size_t>(static_cast<double>(tokens) * (1.0 - val_fraction));
}

uint64_t sequences_in(size_t tokens, int seq_len) {
  return tokens > static_cast<size_t>(seq_len) ? (tokens - 1) / static_cast<size_t>(seq_len) : 0;
}

void check_split_sizes(size_t tokens, const DatasetOptions& options) {
  const size_t train = train_split_size(tokens, options.val_fraction);
  const size_t window = static_cast<size_t>(options.seq_len) + 1;
  if (train < window || (options.val_fraction > 0 && tokens - train < window)) {
    throw InputError(options.path.string() + ": " + std::to_string(tokens) +
                     " tokens are too few for windows of " + std::to_string(window) +
                     " tokens in both splits (val_fraction " +
                     std::to_string(options.val_fraction) +
                     "); use a larger corpus or a smaller model.seq_len");
  }
}

std::string check_dataset_file(const DatasetOptions& options) {
  const std::string p = options.path.string();
  if (options.type == "tokens" && is_token_directory(options.path)) {
    return check_token_directory(options);
  }
  if (options.type == "tokens") {
    const TokenFile file(options.path);
    const uint32_t max_token = check_token_ids(file, options.vocab_size);
    check_split_sizes(file.size(), options);
    return p + ": " + file.format() + " token file, " + std::to_string(file.size()) +
           " tokens, ids 0.." + std::to_string(max_token);
  }
  if (options.type == "text") {
    const RegularFile file(options.path, "text file (data.path)");
    if (file.size() == 0) {
      throw InputError(p + ": text file is empty (0 bytes); point data.path at a UTF-8 corpus");
    }
    check_split_sizes(static_cast<size_t>(file.size()), options);
    return p + ": UTF-8 text, " + std::to_string(file.size()) + " bytes (byte tokens)";
  }
  return {};
}

}  // namespace trainctl::data
