#include "checkpoint/checksum.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace trainctl::checkpoint {

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
