#include "data/token_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/error.h"

namespace trainctl::data {

TokenFile::TokenFile(const std::filesystem::path& path) {
  const std::string p = path.string();
  const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    throw InputError(p + ": cannot open token file: " + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_size <= 0) {
    ::close(fd);
    throw InputError(p + ": token file is empty or unreadable");
  }
  map_bytes_ = static_cast<size_t>(st.st_size);
  map_ = ::mmap(nullptr, map_bytes_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    throw InputError(p + ": cannot memory-map token file: " + std::strerror(errno));
  }
  const auto* header = static_cast<const int32_t*>(map_);
  const size_t header_bytes = kLlmcHeaderInts * sizeof(int32_t);
  if (map_bytes_ >= header_bytes && header[0] == kLlmcMagic) {
    if (header[1] != 1) {
      throw InputError(p + ": llm.c token file version " + std::to_string(header[1]) +
                       " is not supported (expected 1, uint16 tokens)");
    }
    count_ = static_cast<size_t>(header[2]);
    if (header_bytes + count_ * sizeof(uint16_t) > map_bytes_) {
      throw InputError(p + ": llm.c header says " + std::to_string(count_) +
                       " tokens but the file is only " + std::to_string(map_bytes_) +
                       " bytes (truncated?)");
    }
    tokens_ = reinterpret_cast<const uint16_t*>(static_cast<const char*>(map_) + header_bytes);
    format_ = "llm.c";
  } else {
    if (map_bytes_ % 2 != 0) {
      throw InputError(p + ": raw token file has an odd size (" + std::to_string(map_bytes_) +
                       " bytes); expected little-endian uint16 tokens");
    }
    count_ = map_bytes_ / sizeof(uint16_t);
    tokens_ = static_cast<const uint16_t*>(map_);
    format_ = "raw uint16";
  }
}

TokenFile::~TokenFile() {
  if (map_) ::munmap(map_, map_bytes_);
}

}  // namespace trainctl::data
