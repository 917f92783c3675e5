#include "checkpoint/durable_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "util/storage_error.h"

namespace trainctl::checkpoint {

DurableFile::DurableFile(std::filesystem::path path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("cannot create");
}

DurableFile::~DurableFile() {
  if (fd_ >= 0) ::close(fd_);
}

void DurableFile::fail(const std::string& what) {
  const int err = errno;
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  throw_write_error(err, what, path_);
}

void DurableFile::write(const void* data, size_t bytes) {
  if (fd_ < 0) throw std::logic_error("DurableFile::write after finish: " + path_.string());
  crc_.update(data, bytes);
  const auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd_, p, bytes);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("cannot write");
    }
    p += n;
    bytes -= static_cast<size_t>(n);
    bytes_ += static_cast<uint64_t>(n);
  }
}

void DurableFile::finish() {
  if (fd_ < 0) return;
  if (::fsync(fd_) != 0) fail("cannot flush");
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail("cannot close");
}

namespace {
void fsync_path(const std::filesystem::path& path, int flags) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | flags);
  if (fd < 0) {
    throw std::runtime_error("cannot open " + path.string() + ": " + std::strerror(errno));
  }
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) {
    throw std::runtime_error("cannot flush " + path.string() + ": " + std::strerror(err));
  }
}
}  // namespace

void fsync_file(const std::filesystem::path& path) { fsync_path(path, 0); }

void fsync_directory(const std::filesystem::path& dir) { fsync_path(dir, O_DIRECTORY); }

void write_file_atomically(const std::filesystem::path& path, const std::string& text) {
  const std::filesystem::path tmp = path.string() + ".tmp";
  {
    DurableFile file(tmp);
    file.write(text.data(), text.size());
    file.finish();
  }
  std::filesystem::rename(tmp, path);
  fsync_directory(path.has_parent_path() ? path.parent_path() : std::filesystem::path("."));
}

}  // namespace trainctl::checkpoint
