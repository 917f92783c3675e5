#pragma once
// CRC-32C (Castagnoli), in software (slicing-by-8, ~1-2 GB/s). Shared by the checkpoint
// checksums (checkpoint/checksum.h) and the TFRecord framing of TensorBoard event files
// (observe/tfrecord.h), which both specify this polynomial.
#include <cstddef>
#include <cstdint>

namespace trainctl {

// Incremental CRC-32C: update() with consecutive pieces gives the CRC of their concatenation.
class Crc32c {
 public:
  void update(const void* data, size_t bytes);
  uint32_t value() const { return ~state_; }

 private:
  uint32_t state_ = 0xffffffffu;
};

uint32_t crc32c(const void* data, size_t bytes);

}  // namespace trainctl
