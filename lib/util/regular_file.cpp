#include "util/regular_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "util/error.h"

namespace trainctl {

namespace {

[[noreturn]] void refuse_kind(const std::string& p, const std::string& what, mode_t mode) {
  throw InputError(p + ": is " + file_kind(mode) + ", not a regular file; a " + what +
                   " must be a regular file");
}

}  // namespace

std::string file_kind(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "a special file";
}

std::string byte_size_text(uint64_t bytes) {
  char mib[32];
  std::snprintf(mib, sizeof mib, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return std::to_string(bytes) + " bytes (" + mib + ")";
}

RegularFile::RegularFile(const std::filesystem::path& path, std::string what)
    : path_(path), what_(std::move(what)) {
  const std::string p = path_.string();
  // stat first: a device is refused without being opened (opening one can have effects).
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) throw InputError(p + ": no such " + what_);
    throw InputError(p + ": cannot read " + what_ + ": " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) refuse_kind(p, what_, st.st_mode);
  // O_NONBLOCK: if the path was swapped for a FIFO since stat, the open still returns.
  fd_ = ::open(p.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd_ < 0) throw InputError(p + ": cannot open " + what_ + ": " + std::strerror(errno));
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    if (!S_ISREG(st.st_mode)) refuse_kind(p, what_, st.st_mode);
    throw InputError(p + ": cannot read " + what_ + ": " + std::strerror(err));
  }
  // Regular files ignore O_NONBLOCK; cleared so later reads behave as plain reads anyway.
  ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) & ~O_NONBLOCK);
  size_ = static_cast<uint64_t>(st.st_size);
}

RegularFile::~RegularFile() {
  if (fd_ >= 0) ::close(fd_);
}

std::string RegularFile::read_all(uint64_t max_bytes) const {
  const std::string p = path_.string();
  auto too_large = [&](const std::string& size) {
    return InputError(p + ": is " + size + "; a " + what_ + " may be at most " +
                      byte_size_text(max_bytes));
  };
  if (size_ > max_bytes) throw too_large(byte_size_text(size_));
  // One byte beyond the cap tells a file that grew past it from one that ends there.
  std::string text(static_cast<size_t>(size_ < max_bytes ? size_ : max_bytes) + 1, '\0');
  size_t got = 0;
  for (;;) {
    if (got == text.size()) {
      if (got > max_bytes) throw too_large("more than " + byte_size_text(max_bytes));
      text.resize(std::min<uint64_t>(max_bytes, 2 * got) + 1);  // it grew; still bounded
    }
    const ssize_t n = ::read(fd_, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw InputError(p + ": cannot read " + what_ + ": " + std::strerror(errno));
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  text.resize(got);
  return text;
}

void RegularFile::read_at(uint64_t offset, void* out, size_t bytes) const {
  size_t got = 0;
  while (got < bytes) {
    const ssize_t n =
        ::pread(fd_, static_cast<char*>(out) + got, bytes - got, static_cast<off_t>(offset + got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      throw InputError(path_.string() + ": cannot read " + what_ + ": " + std::strerror(errno));
    }
    if (n == 0) {
      throw InputError(path_.string() + ": " + what_ + " ended after " +
                       std::to_string(offset + got) + " bytes while reading it");
    }
    got += static_cast<size_t>(n);
  }
}

}  // namespace trainctl
