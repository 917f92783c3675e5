#include "train/jsonl_file.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "util/storage_error.h"

namespace trainctl::train {

namespace fs = std::filesystem;

namespace {

// The length of the file's prefix that ends with its last newline (0: none), read backwards
// in chunks so a long file costs one chunk when it ends well.
off_t whole_lines_length(int fd, off_t size) {
  constexpr off_t kChunk = 64 * 1024;
  std::vector<char> buf(static_cast<size_t>(kChunk));
  for (off_t end = size; end > 0;) {
    const off_t begin = end > kChunk ? end - kChunk : 0;
    const ssize_t n = ::pread(fd, buf.data(), static_cast<size_t>(end - begin), begin);
    if (n != end - begin) return size;  // unreadable: leave the file as it is
    for (off_t i = end - begin; i > 0; --i) {
      if (buf[static_cast<size_t>(i - 1)] == '\n') return begin + i;
    }
    end = begin;
  }
  return 0;
}

void write_all(int fd, const std::string& text, const fs::path& path) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_write_error(errno, "cannot write", path);
    }
    done += static_cast<size_t>(n);
  }
}

}  // namespace

JsonLinesFile::JsonLinesFile(fs::path path) : path_(std::move(path)) {
  if (path_.empty()) return;
  open_for_append();
  struct stat st {};
  // Only a regular file can be torn (a test may point the file at /dev/full).
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0) return;
  const off_t keep = whole_lines_length(fd_, st.st_size);
  if (keep < st.st_size && ::ftruncate(fd_, keep) == 0) {
    repaired_ = static_cast<size_t>(st.st_size - keep);
  }
}

JsonLinesFile::~JsonLinesFile() {
  if (fd_ >= 0) ::close(fd_);
}

void JsonLinesFile::open_for_append() {
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC,
               0644);  // RDWR: the repair reads
  if (fd_ < 0) throw_write_error(errno, "cannot open", path_);
}

size_t JsonLinesFile::keep_steps_through(int64_t step) {
  struct stat st {};
  if (fd_ < 0 || ::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
  std::ifstream in(path_, std::ios::binary);
  std::string kept;
  size_t dropped = 0;
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.contains("step") && j["step"].is_number_integer() &&
        j["step"].get<int64_t>() > step) {
      ++dropped;
      continue;
    }
    kept += line + '\n';
  }
  if (dropped == 0) return 0;
  // Replaced whole: a crash in between leaves either the old file or the new one.
  const fs::path tmp = path_.string() + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw_write_error(errno, "cannot create", tmp);
  try {
    write_all(fd, kept, tmp);
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path_.c_str()) != 0) throw_write_error(errno, "cannot replace", path_);
  ::close(fd_);
  open_for_append();
  return dropped;
}

void JsonLinesFile::append(const std::string& json) {
  if (fd_ < 0) return;
  const std::string line = json + '\n';
  struct stat st {};
  const bool regular = ::fstat(fd_, &st) == 0 && S_ISREG(st.st_mode);
  try {
    write_all(fd_, line, path_);
  } catch (...) {
    // A write cut short (the disk filled in the middle of the line) must not leave half a
    // line for the next one to continue: cut back to where this line began.
    if (regular && ::ftruncate(fd_, st.st_size) != 0) {
      spdlog::warn("cannot cut the unfinished line off {}: {}", path_.string(),
                   std::strerror(errno));
    }
    throw;
  }
}

}  // namespace trainctl::train
