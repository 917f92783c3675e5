#pragma once
// Opening a file a user named (a job spec, a data file) so that no kind of path can hang
// or exhaust trainctl. Only regular files are accepted: opening a FIFO blocks until a
// writer appears and reading it may never end, /dev/zero never ends, and a directory or
// socket is no data at all. The open itself uses O_NONBLOCK, so even a FIFO that appears
// between a check and the open cannot block it; reads are bounded by a caller's cap.
#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <string>

namespace trainctl {

class RegularFile {
 public:
  // Opens `path` read-only. `what` names the file's role in messages ("job spec",
  // "token file (data.path)"). Throws InputError naming the path when it does not exist,
  // cannot be opened (with the errno text), or is not a regular file (saying what it is:
  // a directory, a FIFO, a character device, ...).
  RegularFile(const std::filesystem::path& path, std::string what);
  ~RegularFile();
  RegularFile(const RegularFile&) = delete;
  RegularFile& operator=(const RegularFile&) = delete;

  int fd() const { return fd_; }
  // The size when it was opened.
  uint64_t size() const { return size_; }
  const std::filesystem::path& path() const { return path_; }
  const std::string& what() const { return what_; }

  // The whole contents. Throws InputError, saying the size and the cap, when the file is
  // larger than max_bytes; never reads more than max_bytes + 1 bytes, even from a file that
  // grows while it is read.
  std::string read_all(uint64_t max_bytes) const;

  // Reads exactly `bytes` bytes at `offset`; throws InputError when the file ends first.
  void read_at(uint64_t offset, void* out, size_t bytes) const;

 private:
  std::filesystem::path path_;
  std::string what_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// What kind of file a stat mode describes, for messages: "a directory", "a FIFO (named
// pipe)", "a character device", "a block device", "a socket", "a regular file".
std::string file_kind(mode_t mode);

// "1048576 bytes (1.0 MiB)".
std::string byte_size_text(uint64_t bytes);

}  // namespace trainctl
