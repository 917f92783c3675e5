#include "tokenizer/byte_level.h"

#include "tokenizer/utf8.h"

namespace trainctl::tokenizer {

ByteLevelAlphabet::ByteLevelAlphabet() {
  bytes_.fill(-1);
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    chars_[b] = printable ? static_cast<char32_t>(b) : next++;
    bytes_[chars_[b]] = b;
    append_utf8(utf8_[b], chars_[b]);
  }
}

std::optional<unsigned char> ByteLevelAlphabet::byte_of(char32_t c) const {
  if (c >= bytes_.size() || bytes_[c] < 0) return std::nullopt;
  return static_cast<unsigned char>(bytes_[c]);
}

std::string ByteLevelAlphabet::encode(std::string_view bytes) const {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += utf8_[static_cast<unsigned char>(c)];
  return out;
}

bool ByteLevelAlphabet::decode(std::string_view token, std::string& out) const {
  const auto* p = reinterpret_cast<const unsigned char*>(token.data());
  const unsigned char* end = p + token.size();
  while (p < end) {
    char32_t cp;
    p += decode_utf8(p, &cp);
    const auto b = byte_of(cp);
    if (!b) return false;
    out.push_back(static_cast<char>(*b));
  }
  return true;
}

}  // namespace trainctl::tokenizer
