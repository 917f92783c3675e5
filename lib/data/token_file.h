#pragma once
// Read-only memory map of a token file: nanoGPT's raw little-endian uint16 `.bin`, or the
// llm.c layout (a header of 256 int32: magic, version, token count; then exactly that many
// tokens, as llm.c's own loader requires). The format is detected from the header:
//   magic 20240520, version 1: uint16 tokens (llm.c's GPT-2 files; what `data prepare`
//                              writes for vocabularies of at most 65,536 ids)
//   magic 20240520, version 2: uint32 tokens (what `data prepare` writes for larger
//                              vocabularies, e.g. Llama 3's 128,256 ids)
//   magic 20240801, version 7: uint32 tokens (llm.c's own Llama 3 files, read as they are)
//
// Opening one is also the check of its structure, for the workers and for the pre-launch
// check alike (data/file_checks.h): a regular file (not a FIFO, device or directory), not
// empty, a header whose magic/version pair is one of the above and whose count is positive
// and matches the file's size exactly (all arithmetic on the count checked, so no header can
// make a reader run past the end of the mapping), a raw file of an even size.
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
  size_t size() const { return count_; }
  // 2 (uint16 ids) or 4 (uint32 ids).
  int bytes_per_token() const { return width_; }
  const std::string& format() const { return format_; }  // "llm.c" | "llm.c uint32" | "raw uint16"

  // Token i (i < size()).
  uint32_t token(size_t i) const {
    return width_ == 2 ? static_cast<const uint16_t*>(tokens_)[i]
                       : static_cast<const uint32_t*>(tokens_)[i];
  }
  // Tokens [begin, begin + count) as int32 (the caller keeps begin + count <= size()).
  void copy(size_t begin, size_t count, int32_t* out) const;

  // The largest token id in the file (one pass over the mapping).
  uint32_t max_token() const;

  static constexpr int32_t kLlmcMagic = 20240520;
  static constexpr int32_t kLlmcVersion = 1;        // uint16 tokens
  static constexpr int32_t kLlmcVersionUint32 = 2;  // uint32 tokens, same magic
  static constexpr int32_t kLlmcLlama3Magic = 20240801;
  static constexpr int32_t kLlmcLlama3Version = 7;  // llm.c's uint32 Llama 3 files
  static constexpr size_t kLlmcHeaderInts = 256;
  static constexpr size_t kLlmcHeaderBytes = kLlmcHeaderInts * sizeof(int32_t);
  // The most ids a uint16 file can hold; larger vocabularies need uint32 files.
  static constexpr int64_t kUint16Vocab = 65536;

 private:
  std::filesystem::path path_;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  const void* tokens_ = nullptr;
  size_t count_ = 0;
  int width_ = 2;
  std::string format_;
};

// Writes `count` ids as an llm.c-layout token file: version 1 (uint16) when every id fits
// `vocab_size` <= 65536, else version 2 (uint32). Atomic (a temporary file renamed).
void write_token_file(const std::filesystem::path& path, const int32_t* ids, size_t count,
                      int64_t vocab_size);

}  // namespace trainctl::data
