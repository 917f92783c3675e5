#pragma once
// TFRecord framing, the container of TensorBoard event files: each record is
//   uint64 length | uint32 masked CRC-32C of the length | data | uint32 masked CRC-32C of data
// (little-endian; the mask is TensorFlow's: rotate right by 15, add 0xa282ead8).
#include <cstdint>
#include <string>
#include <string_view>

namespace trainctl::observe {

uint32_t masked_crc32c(std::string_view data);

// One framed record, ready to append to a file.
std::string tfrecord_frame(std::string_view data);

}  // namespace trainctl::observe
