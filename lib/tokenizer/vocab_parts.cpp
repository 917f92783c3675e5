#include "tokenizer/vocab_parts.h"

#include <unordered_map>

#include "tokenizer/byte_level.h"
#include "util/error.h"

namespace trainctl::tokenizer {

void fill_vocab_and_merges(const std::vector<std::pair<std::string, int64_t>>& vocab,
                           const std::vector<std::pair<std::string, std::string>>& merges,
                           const std::string& source, TokenizerParts& parts) {
  if (vocab.empty()) throw InputError(source + ": the vocabulary is empty");
  const ByteLevelAlphabet alphabet;
  std::unordered_map<std::string, int32_t> by_text;
  by_text.reserve(vocab.size());
  std::unordered_map<int64_t, const std::string*> by_id;
  parts.vocab.reserve(vocab.size());
  for (const auto& [text, id] : vocab) {
    if (id < 0 || id > 0x7fffffff) {
      throw InputError(source + ": token '" + text + "' has id " + std::to_string(id) +
                       "; ids must be between 0 and 2^31-1");
    }
    if (auto [it, fresh] = by_id.emplace(id, &text); !fresh) {
      throw InputError(source + ": id " + std::to_string(id) + " is given to both '" + *it->second +
                       "' and '" + text + "'");
    }
    by_text.emplace(text, static_cast<int32_t>(id));
    std::string bytes;
    // A token spelled outside the byte-level alphabet decodes as its own UTF-8.
    if (!alphabet.decode(text, bytes)) bytes = text;
    parts.vocab.emplace_back(std::move(bytes), static_cast<int32_t>(id));
  }
  auto id_of = [&](const std::string& text, size_t rank) {
    auto it = by_text.find(text);
    if (it == by_text.end()) {
      throw InputError(source + ": merge " + std::to_string(rank + 1) + " uses '" + text +
                       "', which is not in the vocabulary");
    }
    return it->second;
  };
  parts.merges.reserve(merges.size());
  parts.merged_ids.reserve(merges.size());
  for (size_t r = 0; r < merges.size(); ++r) {
    parts.merges.emplace_back(id_of(merges[r].first, r), id_of(merges[r].second, r));
    parts.merged_ids.push_back(id_of(merges[r].first + merges[r].second, r));
  }
}

}  // namespace trainctl::tokenizer
