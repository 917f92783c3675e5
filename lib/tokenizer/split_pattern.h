#pragma once
// The pre-tokenizer's split patterns, written out by hand (no regex engine): they cut text
// into the pieces BPE then encodes one by one, exactly where Hugging Face `tokenizers`
// (Oniguruma, leftmost alternative first, backtracking) cuts with these regexes:
//
//   gpt2:   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   llama3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//           ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// Every character matches one of the alternatives, so the pieces cover the text.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace trainctl::tokenizer {

enum class SplitPattern { gpt2, llama3 };

const char* to_string(SplitPattern pattern);

// The pattern a regex string from tokenizer.json spells (exactly one of the known
// spellings), or nullopt for any other regex.
std::optional<SplitPattern> pattern_from_regex(std::string_view regex);

// The regex text of `pattern` as tokenizer.json spells it.
const char* regex_of(SplitPattern pattern);

// Appends to `pieces` the pieces of `text` (valid UTF-8) in order; they are views into it.
void split_text(std::string_view text, SplitPattern pattern, std::vector<std::string_view>& pieces);

}  // namespace trainctl::tokenizer
