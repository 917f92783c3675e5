#pragma once
// Writes that fail because the storage refuses them (ENOSPC: the file system is full,
// EDQUOT: the user's quota is used up, EROFS: it is mounted read-only) are an environment
// problem the user fixes (free space, raise the quota, remount), not a crash: they exit with
// code 2 like bad input, and the launcher does not restart into the same wall. Any other
// failed write stays an unexpected error.
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "util/error.h"

namespace trainctl {

class StorageFullError : public InputError {
 public:
  using InputError::InputError;
};

inline bool storage_refuses_writes(int err) {
  return err == ENOSPC || err == EDQUOT || err == EROFS;
}

// Throws for a write to `path` that failed with errno `err`: StorageFullError naming the
// path, the reason and what to do when the storage refuses writes, else std::runtime_error
// ("<what> <path>: <strerror>").
[[noreturn]] inline void throw_write_error(int err, const std::string& what,
                                           const std::filesystem::path& path) {
  const std::string text = what + " " + path.string() + ": " + std::strerror(err);
  if (storage_refuses_writes(err)) {
    throw StorageFullError(text + " (free space or quota on that file system, then resume: " +
                           "the last complete checkpoint is intact)");
  }
  throw std::runtime_error(text);
}

}  // namespace trainctl
