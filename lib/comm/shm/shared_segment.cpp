#include "comm/shm/shared_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <stdexcept>
#include <utility>

namespace trainctl::comm::shm {

namespace {

std::string errno_text(int err) { return std::strerror(err); }

// Closes the descriptor on every path: the mapping keeps the memory alive.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

void* map_shared(int fd, size_t bytes, const std::string& name) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    throw std::runtime_error("cannot map shared memory " + name + ": " + errno_text(errno));
  }
  return p;
}

}  // namespace

SharedSegment SharedSegment::create(size_t bytes) {
  std::random_device rd;
  const unsigned long long tag = (static_cast<unsigned long long>(rd()) << 32) ^ rd();
  SharedSegment s;
  s.name_ = "/trainctl-" + std::to_string(::getpid()) + "-" + std::to_string(tag);
  Fd f;
  f.fd = ::shm_open(s.name_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (f.fd < 0) {
    throw std::runtime_error("cannot create shared memory " + s.name_ + ": " + errno_text(errno));
  }
  s.owns_name_ = true;  // from here on the destructor unlinks it
  if (::ftruncate(f.fd, static_cast<off_t>(bytes)) != 0) {
    throw std::runtime_error("cannot size shared memory " + s.name_ + " to " +
                             std::to_string(bytes) + " bytes: " + errno_text(errno));
  }
  if (const int err = ::posix_fallocate(f.fd, 0, static_cast<off_t>(bytes)); err != 0) {
    throw std::runtime_error("cannot reserve " + std::to_string(bytes) +
                             " bytes of shared memory in /dev/shm: " + errno_text(err) +
                             " (is /dev/shm full or too small? e.g. docker --shm-size)");
  }
  s.data_ = map_shared(f.fd, bytes, s.name_);
  s.bytes_ = bytes;
  return s;
}

SharedSegment SharedSegment::open(const std::string& name, size_t bytes) {
  SharedSegment s;
  s.name_ = name;
  Fd f;
  f.fd = ::shm_open(name.c_str(), O_RDWR, 0600);
  if (f.fd < 0) {
    throw std::runtime_error("cannot open shared memory " + name + ": " + errno_text(errno));
  }
  struct stat st {};
  if (::fstat(f.fd, &st) != 0 || static_cast<size_t>(st.st_size) < bytes) {
    throw std::runtime_error("shared memory " + name + " is smaller than " + std::to_string(bytes) +
                             " bytes");
  }
  s.data_ = map_shared(f.fd, bytes, name);
  s.bytes_ = bytes;
  return s;
}

SharedSegment::SharedSegment(SharedSegment&& other) noexcept { *this = std::move(other); }

SharedSegment& SharedSegment::operator=(SharedSegment&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    name_ = std::move(other.name_);
    owns_name_ = std::exchange(other.owns_name_, false);
  }
  return *this;
}

SharedSegment::~SharedSegment() { release(); }

void SharedSegment::unlink_name() {
  if (owns_name_) ::shm_unlink(name_.c_str());
  owns_name_ = false;
}

void SharedSegment::release() noexcept {
  if (data_ != nullptr) ::munmap(data_, bytes_);
  data_ = nullptr;
  if (owns_name_) ::shm_unlink(name_.c_str());
  owns_name_ = false;
}

}  // namespace trainctl::comm::shm
