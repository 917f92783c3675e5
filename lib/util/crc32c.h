#pragma once
// CRC-32C (Castagnoli). Shared by the checkpoint checksums (checkpoint/checksum.h) and the
// TFRecord framing of TensorBoard event files (observe/tfrecord.h), which both specify this
// polynomial. On x86-64 CPUs with SSE4.2 (every CPU of the x86-64-v2 baseline the build
// targets) the `crc32` instruction runs three interleaved streams, at memory speed; elsewhere
// (aarch64 builds, or TRAINCTL_CRC32C=software) a slicing-by-8 table path computes the same
// bits.
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

namespace crc32c_detail {
// The two paths on their own, for the tests that hold them bitwise equal and the benchmark.
// `state` is the raw register (not inverted). hardware_update requires hardware_available().
uint32_t software_update(uint32_t state, const void* data, size_t bytes);
uint32_t hardware_update(uint32_t state, const void* data, size_t bytes);
bool hardware_available();
// "sse4.2" or "software": the path update() takes in this process.
const char* active_path();
}  // namespace crc32c_detail

}  // namespace trainctl
