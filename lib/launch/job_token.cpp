#include "launch/job_token.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include "util/storage_error.h"

namespace trainctl::launch {

std::string generate_token() {
  unsigned char bytes[16];
  int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error(std::string("open /dev/urandom: ") + std::strerror(errno));
  size_t got = 0;
  while (got < sizeof bytes) {
    ssize_t n = ::read(fd, bytes + got, sizeof bytes - got);
    if (n <= 0 && errno != EINTR) {
      ::close(fd);
      throw std::runtime_error(std::string("read /dev/urandom: ") + std::strerror(errno));
    }
    if (n > 0) got += static_cast<size_t>(n);
  }
  ::close(fd);
  static const char* kHex = "0123456789abcdef";
  std::string token;
  for (unsigned char b : bytes) {
    token.push_back(kHex[b >> 4]);
    token.push_back(kHex[b & 15]);
  }
  return token;
}

std::filesystem::path token_file_path(const std::filesystem::path& run_dir) {
  return run_dir / ".rendezvous_token";
}

void write_token_file(const std::filesystem::path& file, const std::string& token) {
  std::filesystem::path tmp = file;
  tmp += ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  // A full or read-only run_dir is the user's to fix: StorageFullError, exit 2.
  if (fd < 0) throw_write_error(errno, "cannot write the token file", tmp);
  ::fchmod(fd, 0600);  // O_CREAT's mode does not apply to a file left by a crash
  std::string line = token + "\n";
  bool ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  ok = ::close(fd) == 0 && ok;
  if (!ok || ::rename(tmp.c_str(), file.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw_write_error(err, "cannot write the token file", file);
  }
}

std::optional<std::string> read_token_file(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::string token;
  if (!in || !std::getline(in, token) || token.empty()) return std::nullopt;
  return token;
}

}  // namespace trainctl::launch
