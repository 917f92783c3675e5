#pragma once
// Turning a vocabulary and merge list spelled in the byte-level alphabet (as tokenizer.json
// and vocab.json store them) into TokenizerParts, checked, for both loaders.
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace trainctl::tokenizer {

// `vocab`: (token string, id); `merges`: (left, right) token strings in rank order. Throws
// InputError "<source>: ..." for a negative or repeated id or a merge whose parts or result
// are not in the vocabulary.
void fill_vocab_and_merges(const std::vector<std::pair<std::string, int64_t>>& vocab,
                           const std::vector<std::pair<std::string, std::string>>& merges,
                           const std::string& source, TokenizerParts& parts);

}  // namespace trainctl::tokenizer
