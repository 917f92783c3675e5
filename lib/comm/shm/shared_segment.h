#pragma once
// A POSIX shared-memory segment (/dev/shm) mapped into this process: the memory that
// ranks on one host exchange data through, without the kernel's TCP stack in between.
#include <cstddef>
#include <string>

namespace trainctl::comm::shm {

class SharedSegment {
 public:
  // Creates a new segment of `bytes` (zero-filled), named "/trainctl-<pid>-<random>".
  // Its pages are reserved up front, so a full /dev/shm fails here with a clear error
  // instead of a SIGBUS on first touch. Throws std::runtime_error naming the cause.
  static SharedSegment create(size_t bytes);
  // Maps the existing segment `name` another process created. Throws std::runtime_error
  // if it does not exist here (another host, or another IPC namespace) or is too small.
  static SharedSegment open(const std::string& name, size_t bytes);

  SharedSegment() = default;
  SharedSegment(SharedSegment&& other) noexcept;
  SharedSegment& operator=(SharedSegment&& other) noexcept;
  SharedSegment(const SharedSegment&) = delete;
  SharedSegment& operator=(const SharedSegment&) = delete;
  // Unmaps; the creator also unlinks the name if unlink_name() was not called yet.
  ~SharedSegment();

  // Removes the name from /dev/shm; the memory lives on while any process maps it.
  // Call once every peer has opened the segment, so nothing is left behind if this
  // process is killed.
  void unlink_name();

  void* data() const { return data_; }
  size_t size() const { return bytes_; }
  const std::string& name() const { return name_; }

 private:
  void release() noexcept;

  void* data_ = nullptr;
  size_t bytes_ = 0;
  std::string name_;
  bool owns_name_ = false;
};

}  // namespace trainctl::comm::shm
