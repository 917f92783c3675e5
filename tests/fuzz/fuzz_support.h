#pragma once
// What the fuzz targets share: an in-memory file for readers that take a path, and the
// check that turns a broken invariant into a crash libFuzzer reports and keeps.
//
// A fuzz target's contract (docs/testing.md, "Fuzzing"): for every input, the code under
// test either returns a value that passes the target's own checks or throws the error type
// its header documents (InputError and its subclasses; std::runtime_error for the
// safetensors reader). Anything else (another exception, a crash, a sanitizer report, a
// hang, unbounded memory) is a bug.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace trainctl::fuzz {

// Aborts with `what` when `ok` is false: libFuzzer saves the input as a crash artifact.
inline void require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz invariant broken: %s\n", what);
    std::abort();
  }
}

// A regular file in memory (memfd_create), reachable by path as /proc/self/fd/N, so
// readers that open, stat and mmap a path see exactly the fuzzer's bytes without disk I/O.
class MemoryFile {
 public:
  MemoryFile() : fd_(memfd_create("trainctl-fuzz", 0)) { require(fd_ >= 0, "memfd_create failed"); }
  ~MemoryFile() { close(fd_); }
  MemoryFile(const MemoryFile&) = delete;
  MemoryFile& operator=(const MemoryFile&) = delete;

  // Replaces the content with `size` bytes at `data`; returns the path to open.
  std::string write(const uint8_t* data, size_t size) {
    require(ftruncate(fd_, 0) == 0, "ftruncate failed");
    size_t done = 0;
    while (done < size) {
      const ssize_t n = pwrite(fd_, data + done, size - done, static_cast<off_t>(done));
      require(n > 0, "pwrite failed");
      done += static_cast<size_t>(n);
    }
    return "/proc/self/fd/" + std::to_string(fd_);
  }

 private:
  int fd_;
};

}  // namespace trainctl::fuzz
