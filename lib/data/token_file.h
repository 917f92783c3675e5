#pragma once
// Read-only memory map of a token file: nanoGPT's raw little-endian uint16 `.bin`, or
// llm.c's format (a header of 256 int32: magic 20240520, version 1, token count; then
// exactly that many uint16 tokens, as llm.c's own loader requires). The format is detected
// from the header.
//
// Opening one is also the check of its structure, for the workers and for the pre-launch
// check alike (data/file_checks.h): a regular file (not a FIFO, device or directory), not
// empty, an llm.c header whose version is 1 and whose count is positive and matches the
// file's size exactly (all arithmetic on the count checked, so no header can make a reader
// run past the end of the mapping), a raw file of an even size.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

namespace trainctl::data {

class TokenFile {
 public:
  // Throws InputError naming the path, what is wrong and what to do.
  explicit TokenFile(const std::filesystem::path& path);
  ~TokenFile();
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;

  const std::filesystem::path& path() const { return path_; }
  const uint16_t* tokens() const { return tokens_; }
  size_t size() const { return count_; }
  const std::string& format() const { return format_; }  // "llm.c" | "raw uint16"

  // The largest token id in the file (one pass over the mapping; uint16 scans fast).
  uint16_t max_token() const;

  static constexpr int32_t kLlmcMagic = 20240520;
  static constexpr int32_t kLlmcVersion = 1;  // uint16 tokens; llm.c's version 2 is uint32
  static constexpr size_t kLlmcHeaderInts = 256;
  static constexpr size_t kLlmcHeaderBytes = kLlmcHeaderInts * sizeof(int32_t);

 private:
  std::filesystem::path path_;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  const uint16_t* tokens_ = nullptr;
  size_t count_ = 0;
  std::string format_;
};

}  // namespace trainctl::data
