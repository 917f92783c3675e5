#pragma once
// A whole file mapped read-only into memory: reading a slice of a shard touches only the
// pages it needs, and the page cache is shared by every rank reading the same file.
#include <cstddef>
#include <filesystem>

namespace trainctl::checkpoint {

class MappedFile {
 public:
  // Throws std::runtime_error naming the file when it cannot be opened or mapped.
  explicit MappedFile(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const unsigned char* data() const { return static_cast<const unsigned char*>(data_); }
  size_t size() const { return size_; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace trainctl::checkpoint
