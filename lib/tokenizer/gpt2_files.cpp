// Reads GPT-2's original vocabulary files: vocab.json ({"token": id}) and merges.txt (an
// optional "#version" line, then one "left right" merge per line in rank order).
#include <nlohmann/json.hpp>

#include "tokenizer/load_tokenizer.h"
#include "tokenizer/vocab_parts.h"
#include "util/error.h"

namespace trainctl::tokenizer {

TokenizerParts parse_gpt2_files(const std::string& vocab_json, const std::string& merges_txt,
                                const std::string& vocab_source, const std::string& merges_source) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(vocab_json);
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range (1e400)
    throw InputError(vocab_source + ": not valid JSON (" + e.what() + ")");
  }
  if (!doc.is_object()) throw InputError(vocab_source + ": not an object of token: id");
  std::vector<std::pair<std::string, int64_t>> vocab;
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    if (!it.value().is_number_integer()) {
      throw InputError(vocab_source + ": '" + it.key() + "' has no integer id");
    }
    vocab.emplace_back(it.key(), it.value().get<int64_t>());
  }
  std::vector<std::pair<std::string, std::string>> merges;
  size_t line_no = 0, pos = 0;
  while (pos < merges_txt.size()) {
    size_t end = merges_txt.find('\n', pos);
    if (end == std::string::npos) end = merges_txt.size();
    std::string line = merges_txt.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (line_no == 1 && line.rfind("#version", 0) == 0)) continue;
    const size_t space = line.find(' ');
    if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos) {
      throw InputError(merges_source + ":" + std::to_string(line_no) + ": '" + line +
                       "' is not a merge (two tokens separated by one space)");
    }
    merges.emplace_back(line.substr(0, space), line.substr(space + 1));
  }
  if (merges.empty()) throw InputError(merges_source + ": holds no merges");
  TokenizerParts parts;
  parts.source = vocab_source + " + " + merges_source;
  parts.kind = "vocab.json + merges.txt";
  // <|endoftext|> is a special token: added before the vocabulary is checked (which checks
  // its id too; one outside int32 is left to that check's message).
  if (auto it = doc.find("<|endoftext|>"); it != doc.end()) {
    if (const auto id = it->get<int64_t>(); id >= 0 && id <= 0x7fffffff) {
      parts.added.push_back({"<|endoftext|>", static_cast<int32_t>(id), true});
    }
  }
  fill_vocab_and_merges(vocab, merges, parts.source, parts);
  parts.pattern = SplitPattern::gpt2;
  return parts;
}

}  // namespace trainctl::tokenizer
