#pragma once
// Turning a vocabulary and merge list spelled in the byte-level alphabet (as tokenizer.json
// and vocab.json store them) into TokenizerParts, checked, for both loaders.
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace trainctl::tokenizer {

// `vocab`: (token string, id); `merges`: (left, right) token strings in rank order;
// parts.added must already hold the added tokens. Throws InputError "<source>: ..." for:
// - an id outside [0, vocab.size() + parts.added.size()): the ids number the tokens, so a
//   larger one is a damaged file (and would size every table by it);
// - a repeated id, or an added token whose id the vocabulary gives to other text;
// - a byte of the 256 without a one-byte token (byte-level BPE starts every piece from its
//   bytes; a missing one would drop text);
// - a merge whose parts or result are not in the vocabulary, or whose result is not the
//   bytes of its parts one after the other (decoding would not give the text back).
void fill_vocab_and_merges(const std::vector<std::pair<std::string, int64_t>>& vocab,
                           const std::vector<std::pair<std::string, std::string>>& merges,
                           const std::string& source, TokenizerParts& parts);

// One more than the largest id a vocabulary of `entries` tokens and `added` added tokens
// may use: the bound fill_vocab_and_merges and Tokenizer check.
int64_t id_bound(size_t entries, size_t added);

}  // namespace trainctl::tokenizer
