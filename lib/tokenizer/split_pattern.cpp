#include "tokenizer/split_pattern.h"

#include "tokenizer/unicode_classes.h"
#include "tokenizer/utf8.h"

namespace trainctl::tokenizer {

namespace {

constexpr const char* kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr const char* kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// tiktoken's spelling of the Llama 3 pattern (the same language: {1,3} and the case-folded
// contractions written as character classes).
constexpr const char* kLlama3RegexTiktoken =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// The text as classified code points, read lazily at byte offsets.
class Text {
 public:
  explicit Text(std::string_view t)
      : s_(reinterpret_cast<const unsigned char*>(t.data())), n_(t.size()) {}
  size_t size() const { return n_; }
  unsigned char byte(size_t pos) const { return s_[pos]; }
  // The code point at pos (< size()) and its length.
  char32_t at(size_t pos, int* len) const {
    if (s_[pos] < 0x80) {
      *len = 1;
      return s_[pos];
    }
    char32_t cp;
    *len = decode_utf8(s_ + pos, &cp);
    return cp;
  }
  CharClass cls(size_t pos, int* len) const { return char_class(at(pos, len)); }
  // The end of the run of class k starting at pos; *last = where its last code point starts.
  size_t run(size_t pos, CharClass k, size_t* last = nullptr) const {
    size_t l = pos;
    while (pos < n_) {
      if (s_[pos] < 0x80) {
        if (detail::kAscii.c[s_[pos]] != k) break;
        l = pos++;
        continue;
      }
      int len;
      if (cls(pos, &len) != k) break;
      l = pos;
      pos += static_cast<size_t>(len);
    }
    if (last) *last = l;
    return pos;
  }
  size_t newline_run(size_t pos) const {
    while (pos < n_ && (s_[pos] == '\r' || s_[pos] == '\n')) ++pos;
    return pos;
  }

 private:
  const unsigned char* s_;
  size_t n_;
};

bool is_lower(unsigned char c, char lower) { return c == lower || c == lower - 'a' + 'A'; }

// 's 't 're 've 'm 'll 'd at i (text[i] == '\''): the match's length, or 0.
size_t contraction(const Text& t, size_t i, bool ignore_case) {
  if (i + 1 >= t.size()) return 0;
  auto is = [&](size_t pos, char c) {
    return pos < t.size() && (ignore_case ? is_lower(t.byte(pos), c) : t.byte(pos) == c);
  };
  if (is(i + 1, 's') || is(i + 1, 't') || is(i + 1, 'm') || is(i + 1, 'd')) return 2;
  if ((is(i + 1, 'r') && is(i + 2, 'e')) || (is(i + 1, 'v') && is(i + 2, 'e')) ||
      (is(i + 1, 'l') && is(i + 2, 'l'))) {
    return 3;
  }
  // Unicode case folding matches U+017F LATIN SMALL LETTER LONG S to s.
  if (ignore_case && i + 2 < t.size() && t.byte(i + 1) == 0xC5 && t.byte(i + 2) == 0xBF) return 3;
  return 0;
}

// \s+(?!\S)|\s+ at i (a space): the whole run at the end of the text or when it is one
// character; otherwise all but its last character, which then starts the next piece.
size_t whitespace(const Text& t, size_t i) {
  size_t last = i;
  const size_t end = t.run(i, CharClass::kSpace, &last);
  if (end == t.size() || last == i) return end;
  return last;
}

size_t match_gpt2(const Text& t, size_t i) {
  int len0;
  const char32_t c0 = t.at(i, &len0);
  if (c0 == '\'') {
    if (size_t n = contraction(t, i, false)) return i + n;
  }
  size_t j = i;
  CharClass k = char_class(c0);
  if (c0 == ' ' && i + 1 < t.size()) {  // ` ?` before \p{L}+, \p{N}+ or [^\s\p{L}\p{N}]+
    int len1;
    const CharClass k1 = t.cls(i + 1, &len1);
    if (k1 != CharClass::kSpace) {
      j = i + 1;
      k = k1;
    }
  }
  if (k != CharClass::kSpace) return t.run(j, k);
  return whitespace(t, i);
}

size_t match_llama3(const Text& t, size_t i) {
  int len0;
  const char32_t c0 = t.at(i, &len0);
  if (c0 == '\'') {
    if (size_t n = contraction(t, i, true)) return i + n;
  }
  const CharClass k0 = char_class(c0);
  const size_t next = i + static_cast<size_t>(len0);
  if (k0 == CharClass::kLetter) return t.run(i, CharClass::kLetter);
  int len1 = 0;
  const CharClass k1 = next < t.size() ? t.cls(next, &len1) : CharClass::kOther;
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (k0 != CharClass::kNumber && c0 != '\r' && c0 != '\n' && next < t.size() &&
      k1 == CharClass::kLetter) {
    return t.run(next, CharClass::kLetter);
  }
  if (k0 == CharClass::kNumber) {  // \p{N}{1,3}
    size_t pos = i;
    for (int n = 0; n < 3 && pos < t.size(); ++n) {
      int len;
      if (t.cls(pos, &len) != CharClass::kNumber) break;
      pos += static_cast<size_t>(len);
    }
    return pos;
  }
  //  ?[^\s\p{L}\p{N}]+[\r\n]*
  if (k0 == CharClass::kOther) return t.newline_run(t.run(i, CharClass::kOther));
  if (c0 == ' ' && next < t.size() && k1 == CharClass::kOther) {
    return t.newline_run(t.run(next, CharClass::kOther));
  }
  // \s*[\r\n]+ : up to and including the run's last \r or \n.
  size_t last = i;
  const size_t end = t.run(i, CharClass::kSpace, &last);
  for (size_t pos = end; pos > i; --pos) {
    if (t.byte(pos - 1) == '\r' || t.byte(pos - 1) == '\n') return pos;
  }
  if (end == t.size() || last == i) return end;  // \s+(?!\S)|\s+
  return last;
}

}  // namespace

const char* to_string(SplitPattern pattern) {
  return pattern == SplitPattern::gpt2 ? "gpt2" : "llama3";
}

const char* regex_of(SplitPattern pattern) {
  return pattern == SplitPattern::gpt2 ? kGpt2Regex : kLlama3Regex;
}

std::optional<SplitPattern> pattern_from_regex(std::string_view regex) {
  if (regex == kGpt2Regex) return SplitPattern::gpt2;
  if (regex == kLlama3Regex || regex == kLlama3RegexTiktoken) return SplitPattern::llama3;
  return std::nullopt;
}

void split_text(std::string_view text, SplitPattern pattern,
                std::vector<std::string_view>& pieces) {
  const Text t(text);
  size_t i = 0;
  while (i < t.size()) {
    const size_t end = pattern == SplitPattern::gpt2 ? match_gpt2(t, i) : match_llama3(t, i);
    pieces.push_back(text.substr(i, end - i));
    i = end;
  }
}

}  // namespace trainctl::tokenizer
