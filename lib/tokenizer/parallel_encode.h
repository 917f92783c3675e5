#pragma once
// Encoding on several threads with the ids one thread would give. A long text is cut into
// chunks at line starts where the split patterns always end a piece (a letter after a
// single "\n" that follows a non-space ASCII character: no pattern's piece crosses that
// point and none looks past it), and the chunks are encoded concurrently; documents are
// encoded concurrently as they are.
#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace trainctl::tokenizer {

// Where `text` may be cut into pieces of about `chunk_bytes` (offsets, increasing, without 0
// and text.size()). Empty when the tokenizer is not chunkable().
std::vector<size_t> chunk_boundaries(const Tokenizer& tokenizer, std::string_view text,
                                     size_t chunk_bytes);

// The ids of `text` (valid UTF-8), encoded on up to `threads` threads.
std::vector<int32_t> encode_text(const Tokenizer& tokenizer, std::string_view text, int threads);

// The ids of each document (valid UTF-8), on up to `threads` threads; `done(bytes)` (if
// set) is called from the calling thread as documents finish, for progress.
std::vector<std::vector<int32_t>> encode_documents(const Tokenizer& tokenizer,
                                                   const std::vector<std::string_view>& docs,
                                                   int threads,
                                                   const std::function<void(size_t)>& done = {});

}  // namespace trainctl::tokenizer
