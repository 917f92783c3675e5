#pragma once
// The checks a dataset's file must pass, in one place. The workers run them when they load
// the file (CorpusDataset), and `validate` and `train` run them before anything starts (no
// run_dir, no worker), so a file the workers would refuse is refused up front with exit
// code 2 instead of from inside a worker after launch.
#include <cstddef>
#include <cstdint>
#include <string>

#include "data/dataset.h"
#include "data/token_file.h"

namespace trainctl::data {

// Every token id of `file` is below vocab_size (one scan of the mapping); returns the
// largest. Throws InputError naming the file, the largest id and the model.vocab_size that
// would fit.
uint32_t check_token_ids(const TokenFile& file, int vocab_size);

// A corpus of `tokens` tokens split by options.val_fraction leaves at least one window of
// seq_len + 1 tokens (inputs plus shifted targets) in the training head and, when
// val_fraction > 0, in the validation tail. Throws InputError saying the sizes.
void check_split_sizes(size_t tokens, const DatasetOptions& options);

// The training split's length in tokens: the head of the corpus, before the validation tail.
size_t train_split_size(size_t tokens, double val_fraction);

// Sequences of seq_len + 1 tokens that start every seq_len tokens in a span of `tokens`.
uint64_t sequences_in(size_t tokens, int seq_len);

// The whole pre-launch check of options.path for data.type text and tokens, without
// building the dataset: for tokens everything TokenFile checks, the token ids against
// vocab_size and the split sizes; for text that it is a regular, non-empty file and the
// split sizes (it is not read: every byte is a valid token). Returns a line for
// `validate`, e.g. "/data/train.bin: llm.c token file, 1000000 tokens, ids 0..50256";
// empty for synthetic data. A tokens directory (`trainctl data prepare`) gets
// check_token_directory (data/manifest_dataset.h). Throws InputError.
std::string check_dataset_file(const DatasetOptions& options);

}  // namespace trainctl::data
