#include "observe/tfrecord.h"

#include <cstring>

#include "util/crc32c.h"

namespace trainctl::observe {

uint32_t masked_crc32c(std::string_view data) {
  const uint32_t crc = crc32c(data.data(), data.size());
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::string tfrecord_frame(std::string_view data) {
  const uint64_t length = data.size();
  char header[8];
  std::memcpy(header, &length, 8);  // little-endian hosts only (x86-64, aarch64)
  const uint32_t header_crc = masked_crc32c(std::string_view(header, 8));
  const uint32_t data_crc = masked_crc32c(data);
  std::string out;
  out.reserve(16 + data.size());
  out.append(header, 8);
  out.append(reinterpret_cast<const char*>(&header_crc), 4);
  out.append(data);
  out.append(reinterpret_cast<const char*>(&data_crc), 4);
  return out;
}

}  // namespace trainctl::observe
