#pragma once
// `trainctl data encode|decode`: one text file to token ids and back, for checking a
// tokenizer against another implementation and for timing it. Ids are written as raw
// little-endian uint32 (no header), one per token.
#include <cstddef>
#include <filesystem>

#include "tokenizer/tokenizer.h"

namespace trainctl::data {

struct EncodeStats {
  size_t bytes = 0;
  size_t tokens = 0;
  double seconds = 0;      // encoding alone (not reading or writing), wall clock
  double cpu_seconds = 0;  // the process's CPU time while encoding (all threads)
};

// Reads `input` (UTF-8, else InputError naming the offset), encodes it on `threads`
// threads and writes the ids to `out` (atomically: a temporary file renamed).
EncodeStats encode_file(const tokenizer::Tokenizer& tokenizer, const std::filesystem::path& input,
                        const std::filesystem::path& out, int threads);

// Reads uint32 ids from `input` and writes their text to `out`. InputError for a file
// whose size is not a multiple of 4 or an id outside the vocabulary.
size_t decode_file(const tokenizer::Tokenizer& tokenizer, const std::filesystem::path& input,
                   const std::filesystem::path& out);

// Writes `bytes` to `path` through a temporary file and a rename; InputError on failure.
void write_file_atomically(const std::filesystem::path& path, const void* bytes, size_t size);

}  // namespace trainctl::data
