#pragma once
// An append-only JSON-lines file (metrics.jsonl) that readers can trust after any crash:
// every line goes out in one write(2) on an O_APPEND descriptor, so a reader (or a crash)
// sees whole lines or none of a line, and opening the file repairs a torn last line that an
// earlier process left (killed mid-write, disk full) by cutting it off.
//
// A resumed run repeats no step: keep_steps_through(N) drops every line whose "step" is
// above N (the steps after the checkpoint a restart continues from, which it trains again).
#include <cstdint>
#include <filesystem>
#include <string>

namespace trainctl::train {

class JsonLinesFile {
 public:
  // Opens (creating) `path` for appending and cuts off a torn last line. An empty path
  // gives a file that drops every line (ranks that write no metrics).
  explicit JsonLinesFile(std::filesystem::path path);
  ~JsonLinesFile();
  JsonLinesFile(const JsonLinesFile&) = delete;
  JsonLinesFile& operator=(const JsonLinesFile&) = delete;

  bool is_open() const { return fd_ >= 0; }
  // Bytes of a torn last line the constructor cut off (0: the file ended with a newline).
  size_t repaired_bytes() const { return repaired_; }
  // Removes every line whose integer "step" is greater than `step` (lines without one are
  // kept); rewrites the file atomically (temporary file + rename) only when one is dropped.
  // Returns the number of lines dropped.
  size_t keep_steps_through(int64_t step);
  // Appends `json` and a newline with one write(2). Throws StorageFullError (exit code 2)
  // when the file system is full, over quota or read-only, std::runtime_error otherwise,
  // both naming the file.
  void append(const std::string& json);

 private:
  void open_for_append();

  std::filesystem::path path_;
  int fd_ = -1;
  size_t repaired_ = 0;
};

}  // namespace trainctl::train
