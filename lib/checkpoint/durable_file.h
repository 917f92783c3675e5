#pragma once
// Files that are on disk when we say so: written with write(2), fsync'ed before close, and
// small files replaced atomically (temporary file + rename + fsync of the directory), so a
// crash or power loss never leaves a half-written file under its final name.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

#include "checkpoint/checksum.h"

namespace trainctl::checkpoint {

// A new file (truncated if it exists) written sequentially; every byte also feeds a
// CRC-32C. finish() flushes it to disk; a DurableFile destroyed before finish() just closes.
class DurableFile {
 public:
  explicit DurableFile(std::filesystem::path path);
  ~DurableFile();
  DurableFile(const DurableFile&) = delete;
  DurableFile& operator=(const DurableFile&) = delete;

  void write(const void* data, size_t bytes);
  // fsync + close. Throws std::runtime_error naming the file on failure (e.g. disk full).
  void finish();

  uint64_t bytes() const { return bytes_; }
  uint32_t crc() const { return crc_.value(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  [[noreturn]] void fail(const std::string& what);

  std::filesystem::path path_;
  int fd_ = -1;
  uint64_t bytes_ = 0;
  Crc32c crc_;
};

// fsync an existing file (e.g. one written by another process) so its data is durable.
void fsync_file(const std::filesystem::path& path);

// fsync a directory so the names created, renamed or removed in it are durable.
void fsync_directory(const std::filesystem::path& dir);

// Replaces `path` with `text` atomically and durably (temporary file, rename, fsync dir).
void write_file_atomically(const std::filesystem::path& path, const std::string& text);

}  // namespace trainctl::checkpoint
