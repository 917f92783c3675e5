#pragma once
// Read-only memory map of a token file: nanoGPT's raw little-endian uint16 `.bin`, or
// llm.c's format (a header of 256 int32: magic 20240520, version 1, token count; then
// uint16 tokens). The format is detected from the header.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

namespace trainctl::data {

class TokenFile {
 public:
  explicit TokenFile(const std::filesystem::path& path);  // throws InputError
  ~TokenFile();
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;

  const uint16_t* tokens() const { return tokens_; }
  size_t size() const { return count_; }
  const std::string& format() const { return format_; }  // "llm.c" | "raw uint16"

  static constexpr int32_t kLlmcMagic = 20240520;
  static constexpr size_t kLlmcHeaderInts = 256;

 private:
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  const uint16_t* tokens_ = nullptr;
  size_t count_ = 0;
  std::string format_;
};

}  // namespace trainctl::data
