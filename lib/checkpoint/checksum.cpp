#include "checkpoint/checksum.h"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace trainctl::checkpoint {

namespace {

// Slicing-by-8 tables for the reflected Castagnoli polynomial, computed at compile time.
using Tables = std::array<std::array<uint32_t, 256>, 8>;

constexpr Tables make_tables() {
  Tables t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
    t[0][i] = c;
  }
  for (uint32_t i = 0; i < 256; ++i) {
    for (size_t s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xff];
  }
  return t;
}

constexpr Tables kTables = make_tables();

}  // namespace

void Crc32c::update(const void* data, size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t c = state_;
  while (bytes >= 8) {
    uint32_t lo = 0, hi = 0;
    std::memcpy(&lo, p, 4);  // little-endian hosts only (x86-64, aarch64)
    std::memcpy(&hi, p + 4, 4);
    lo ^= c;
    c = kTables[7][lo & 0xff] ^ kTables[6][(lo >> 8) & 0xff] ^ kTables[5][(lo >> 16) & 0xff] ^
        kTables[4][lo >> 24] ^ kTables[3][hi & 0xff] ^ kTables[2][(hi >> 8) & 0xff] ^
        kTables[1][(hi >> 16) & 0xff] ^ kTables[0][hi >> 24];
    p += 8;
    bytes -= 8;
  }
  while (bytes-- > 0) c = (c >> 8) ^ kTables[0][(c ^ *p++) & 0xff];
  state_ = c;
}

uint32_t crc32c(const void* data, size_t bytes) {
  Crc32c crc;
  crc.update(data, bytes);
  return crc.value();
}

uint32_t file_crc32c(const std::filesystem::path& path, uint64_t* bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    throw std::runtime_error("cannot open " + path.string() + ": " + std::strerror(errno));
  }
  std::vector<unsigned char> buffer(size_t{4} << 20);
  Crc32c crc;
  uint64_t total = 0;
  for (;;) {
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      throw std::runtime_error("cannot read " + path.string() + ": " + std::strerror(err));
    }
    if (n == 0) break;
    crc.update(buffer.data(), static_cast<size_t>(n));
    total += static_cast<uint64_t>(n);
  }
  ::close(fd);
  if (bytes) *bytes = total;
  return crc.value();
}

std::string checksum_text(uint32_t crc) {
  char text[16];
  std::snprintf(text, sizeof text, "crc32c:%08x", crc);
  return text;
}

}  // namespace trainctl::checkpoint
