#pragma once
// CRC-32C (Castagnoli; util/crc32c.h) of checkpoint files: detects truncated, bit-flipped
// or overwritten checkpoint shards. Its text form, "crc32c:0a1b2c3d",
// is what metadata.json stores, so another algorithm can be added later by its prefix.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

#include "util/crc32c.h"

namespace trainctl::checkpoint {

using trainctl::Crc32c;
using trainctl::crc32c;

// The CRC-32C of a whole file, read in large blocks; `bytes` receives its size.
// Throws std::runtime_error naming the file when it cannot be read.
uint32_t file_crc32c(const std::filesystem::path& path, uint64_t* bytes = nullptr);

// "crc32c:" followed by 8 lowercase hex digits.
std::string checksum_text(uint32_t crc);

}  // namespace trainctl::checkpoint
