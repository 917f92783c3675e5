#pragma once
// The character classes the byte-level BPE split patterns test: \p{L}, \p{N} and \s (as
// Oniguruma, the regex engine of Hugging Face `tokenizers`, defines it for Unicode:
// U+0009..U+000D, U+0085 and the separators Z*). The table behind char_class_slow is
// generated from Python's unicodedata (scripts/dev/gen_unicode_classes.py).
#include <cstdint>

namespace trainctl::tokenizer {

enum class CharClass : uint8_t { kOther = 0, kLetter = 1, kNumber = 2, kSpace = 3 };

// Binary search over the generated ranges (any code point).
CharClass char_class_slow(char32_t cp);

namespace detail {
struct AsciiClasses {
  CharClass c[128];
  constexpr AsciiClasses() : c() {
    for (int i = 0; i < 128; ++i) {
      CharClass k = CharClass::kOther;
      if ((i >= 'a' && i <= 'z') || (i >= 'A' && i <= 'Z')) k = CharClass::kLetter;
      if (i >= '0' && i <= '9') k = CharClass::kNumber;
      if ((i >= 0x09 && i <= 0x0D) || i == ' ') k = CharClass::kSpace;
      c[i] = k;
    }
  }
};
inline constexpr AsciiClasses kAscii{};
}  // namespace detail

inline CharClass char_class(char32_t cp) {
  return cp < 128 ? detail::kAscii.c[cp] : char_class_slow(cp);
}

}  // namespace trainctl::tokenizer
