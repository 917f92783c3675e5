#pragma once
// GPT-2's byte-level alphabet: every byte is written as one printable Unicode character
// (bytes_to_unicode in GPT-2's encoder.py), so a vocabulary of strings covers all byte
// sequences. Printable Latin-1 bytes map to themselves; the others to U+0100 onwards.
#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace trainctl::tokenizer {

class ByteLevelAlphabet {
 public:
  ByteLevelAlphabet();
  // The character byte b is written as.
  char32_t char_of(unsigned char b) const { return chars_[b]; }
  // Its UTF-8 encoding (one or two bytes).
  const std::string& utf8_of(unsigned char b) const { return utf8_[b]; }
  // The byte a character stands for, or nullopt for characters outside the alphabet.
  std::optional<unsigned char> byte_of(char32_t c) const;
  // `bytes` written in the alphabet (UTF-8).
  std::string encode(std::string_view bytes) const;
  // A vocabulary string (UTF-8) back to bytes; false when it holds a character outside the
  // alphabet (the bytes up to it are appended).
  bool decode(std::string_view token, std::string& out) const;

 private:
  std::array<char32_t, 256> chars_{};
  std::array<std::string, 256> utf8_;
  std::array<int, 512> bytes_{};  // character (< 512) -> byte, or -1
};

}  // namespace trainctl::tokenizer
