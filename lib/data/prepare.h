#pragma once
// `trainctl data prepare`: text (a file, a directory of them, or JSONL) tokenized with a BPE
// tokenizer into llm.c-layout token files (data/token_file.h: uint16 ids, version 1, for a
// vocabulary of at most 65,536; uint32 ids, version 2, beyond) plus manifest.json
// (data/manifest.h) in one directory, ready for `data: {type: tokens, path: DIR}`.
//
// Documents are encoded on several threads (long ones in chunks, tokenizer/parallel_encode.h)
// and concatenated in input order, separated by the end-of-text token when the vocabulary
// has one; the last val_fraction of the tokens is the validation split. The tokenizer's
// files are copied into the directory (for `ckpt export --format hf`).
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

#include "tokenizer/load_tokenizer.h"

namespace trainctl::data {

struct PrepareOptions {
  std::filesystem::path input;
  std::filesystem::path out_dir;
  double val_fraction = 0.005;
  int threads = 1;
  int64_t shard_tokens = 100'000'000;  // tokens per .bin file at most
};

struct PrepareProgress {
  size_t done_bytes = 0, total_bytes = 0;
  size_t tokens = 0;
};

struct PrepareSummary {
  int64_t train_tokens = 0, val_tokens = 0;
  std::string text;  // what was written, for the console
};

// Throws InputError (naming the file and the problem) for an empty or non-UTF-8 input, a
// val_fraction outside [0, 0.5], an out_dir that is a file or a non-empty directory without a
// manifest.json (an older prepared directory is replaced).
PrepareSummary prepare_tokens(const tokenizer::LoadedTokenizer& tokenizer,
                              const PrepareOptions& options,
                              const std::function<void(const PrepareProgress&)>& progress = {});

}  // namespace trainctl::data
