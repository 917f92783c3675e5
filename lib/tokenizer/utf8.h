#pragma once
// UTF-8 for the tokenizer: validation (text that is not UTF-8 is refused, naming the byte
// offset) and decoding of text already validated.
#include <cstddef>
#include <string>
#include <string_view>

namespace trainctl::tokenizer {

// The offset of the first byte that does not start a valid UTF-8 sequence (overlong forms,
// surrogates and code points above U+10FFFF are invalid, as in Rust's str), or npos.
size_t find_invalid_utf8(std::string_view text);

// Throws InputError "<what>: not UTF-8 text: invalid byte 0x.. at offset N (line L)" when
// `text` is not valid UTF-8.
void require_utf8(std::string_view text, const std::string& what);

// Decodes the code point at p (valid UTF-8, p < end) and returns its length in bytes.
inline int decode_utf8(const unsigned char* p, char32_t* cp) {
  const unsigned char b = p[0];
  if (b < 0x80) {
    *cp = b;
    return 1;
  }
  if (b < 0xE0) {
    *cp = (static_cast<char32_t>(b & 0x1F) << 6) | (p[1] & 0x3F);
    return 2;
  }
  if (b < 0xF0) {
    *cp = (static_cast<char32_t>(b & 0x0F) << 12) | (static_cast<char32_t>(p[1] & 0x3F) << 6) |
          (p[2] & 0x3F);
    return 3;
  }
  *cp = (static_cast<char32_t>(b & 0x07) << 18) | (static_cast<char32_t>(p[1] & 0x3F) << 12) |
        (static_cast<char32_t>(p[2] & 0x3F) << 6) | (p[3] & 0x3F);
  return 4;
}

// Appends the UTF-8 encoding of cp.
void append_utf8(std::string& out, char32_t cp);

}  // namespace trainctl::tokenizer
