#include "tokenizer/vocab_parts.h"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "tokenizer/byte_level.h"
#include "util/error.h"

namespace trainctl::tokenizer {

namespace {

// A token as the file spells it, in quotes, JSON-escaped (control characters stay readable).
std::string quoted(const std::string& text) {
  const std::string json =
      nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return "'" + json.substr(1, json.size() - 2) + "'";
}

void check_id(const std::string& source, const std::string& what, const std::string& text,
              int64_t id, int64_t bound, size_t entries, size_t added) {
  if (id >= 0 && id < bound) return;
  throw InputError(source + ": " + what + " " + quoted(text) + " has id " + std::to_string(id) +
                   "; ids must lie in [0, " + std::to_string(bound) + ") (the " +
                   std::to_string(entries) + " vocabulary entries and " + std::to_string(added) +
                   (added == 1 ? " added token" : " added tokens") +
                   ", numbered from 0). The file is damaged or was edited: use the "
                   "tokenizer's original files");
}

// Every byte needs its own token: a piece starts as one symbol per byte.
void check_bytes(const TokenizerParts& parts, const std::string& source) {
  bool have[256] = {};
  for (const auto& [bytes, id] : parts.vocab) {
    if (bytes.size() == 1) have[static_cast<unsigned char>(bytes[0])] = true;
  }
  const ByteLevelAlphabet alphabet;
  std::string list;
  int missing = 0;
  for (int b = 0; b < 256; ++b) {
    if (have[b]) continue;
    if (++missing <= 8) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02X", b);
      list += std::string(list.empty() ? "" : ", ") +
              quoted(alphabet.utf8_of(static_cast<unsigned char>(b))) + " (byte " + hex + ")";
    }
  }
  if (missing == 0) return;
  throw InputError(source + ": the vocabulary has no token for " + std::to_string(missing) +
                   " of the 256 bytes: " + list + (missing > 8 ? ", ..." : "") +
                   ". A byte-level BPE vocabulary needs every byte as a token (spelled in "
                   "GPT-2's byte alphabet), or text holding those bytes could not be encoded; "
                   "use the tokenizer's complete original file");
}

void check_added(const TokenizerParts& parts, const std::string& source,
                 const std::unordered_map<int64_t, size_t>& by_id, int64_t bound, size_t entries) {
  std::unordered_map<int32_t, const std::string*> added_by_id;
  for (const AddedToken& a : parts.added) {
    check_id(source, "added token", a.content, a.id, bound, entries, parts.added.size());
    if (auto it = by_id.find(a.id);
        it != by_id.end() && parts.vocab[it->second].first != a.content) {
      throw InputError(source + ": added token " + quoted(a.content) + " has id " +
                       std::to_string(a.id) + ", which the vocabulary gives to " +
                       quoted(parts.vocab[it->second].first) +
                       "; decoding could not tell them apart. Fix the id");
    }
    if (auto [it, fresh] = added_by_id.emplace(a.id, &a.content);
        !fresh && *it->second != a.content) {
      throw InputError(source + ": id " + std::to_string(a.id) + " is given to both added tokens " +
                       quoted(*it->second) + " and " + quoted(a.content));
    }
  }
}

}  // namespace

int64_t id_bound(size_t entries, size_t added) { return static_cast<int64_t>(entries + added); }

void fill_vocab_and_merges(const std::vector<std::pair<std::string, int64_t>>& vocab,
                           const std::vector<std::pair<std::string, std::string>>& merges,
                           const std::string& source, TokenizerParts& parts) {
  if (vocab.empty()) throw InputError(source + ": the vocabulary is empty");
  const int64_t bound = id_bound(vocab.size(), parts.added.size());
  const ByteLevelAlphabet alphabet;
  std::unordered_map<std::string, size_t> by_text;  // -> index in parts.vocab
  by_text.reserve(vocab.size());
  std::unordered_map<int64_t, size_t> by_id;
  parts.vocab.reserve(vocab.size());
  for (const auto& [text, id] : vocab) {
    check_id(source, "token", text, id, bound, vocab.size(), parts.added.size());
    if (auto [it, fresh] = by_id.emplace(id, parts.vocab.size()); !fresh) {
      throw InputError(source + ": id " + std::to_string(id) + " is given to both " +
                       quoted(vocab[it->second].first) + " and " + quoted(text));
    }
    by_text.emplace(text, parts.vocab.size());
    std::string bytes;
    // A token spelled outside the byte-level alphabet decodes as its own UTF-8.
    if (!alphabet.decode(text, bytes)) bytes = text;
    parts.vocab.emplace_back(std::move(bytes), static_cast<int32_t>(id));
  }
  check_bytes(parts, source);
  check_added(parts, source, by_id, bound, vocab.size());
  auto index_of = [&](const std::string& text, size_t rank) {
    auto it = by_text.find(text);
    if (it == by_text.end()) {
      throw InputError(source + ": merge " + std::to_string(rank + 1) + " uses " + quoted(text) +
                       ", which is not in the vocabulary");
    }
    return it->second;
  };
  parts.merges.reserve(merges.size());
  parts.merged_ids.reserve(merges.size());
  for (size_t r = 0; r < merges.size(); ++r) {
    const auto& [a_bytes, a_id] = parts.vocab[index_of(merges[r].first, r)];
    const auto& [b_bytes, b_id] = parts.vocab[index_of(merges[r].second, r)];
    const auto& [ab_bytes, ab_id] = parts.vocab[index_of(merges[r].first + merges[r].second, r)];
    if (ab_bytes != a_bytes + b_bytes) {
      throw InputError(source + ": merge " + std::to_string(r + 1) + " (" +
                       quoted(merges[r].first) + " " + quoted(merges[r].second) +
                       ") gives a token whose bytes are not those of its two parts; decoding "
                       "would not give the text back");
    }
    parts.merges.emplace_back(a_id, b_id);
    parts.merged_ids.push_back(ab_id);
  }
}

}  // namespace trainctl::tokenizer
