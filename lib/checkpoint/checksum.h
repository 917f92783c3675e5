#pragma once
// CRC-32C (Castagnoli) of buffers and files, in software (slicing-by-8, ~1-2 GB/s): detects
// truncated, bit-flipped or overwritten checkpoint shards. Its text form, "crc32c:0a1b2c3d",
// is what metadata.json stores, so another algorithm can be added later by its prefix.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

namespace trainctl::checkpoint {

// Incremental CRC-32C: update() with consecutive pieces gives the CRC of their concatenation.
class Crc32c {
 public:
  void update(const void* data, size_t bytes);
  uint32_t value() const { return ~state_; }

 private:
  uint32_t state_ = 0xffffffffu;
};

uint32_t crc32c(const void* data, size_t bytes);

// The CRC-32C of a whole file, read in large blocks; `bytes` receives its size.
// Throws std::runtime_error naming the file when it cannot be read.
uint32_t file_crc32c(const std::filesystem::path& path, uint64_t* bytes = nullptr);

// "crc32c:" followed by 8 lowercase hex digits.
std::string checksum_text(uint32_t crc);

}  // namespace trainctl::checkpoint
