#include "util/process_memory.h"

#include <fstream>
#include <sstream>
#include <string>

namespace trainctl {

namespace {

// The value of "Field:   123 kB" in a /proc file, in bytes.
std::optional<size_t> proc_field_kb(const char* path, const std::string& field) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, field.size(), field) != 0 || line.size() <= field.size() ||
        line[field.size()] != ':') {
      continue;
    }
    std::istringstream value(line.substr(field.size() + 1));
    size_t kb = 0;
    if (value >> kb) return kb * 1024;
    return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace

std::optional<size_t> peak_rss_bytes() { return proc_field_kb("/proc/self/status", "VmHWM"); }

std::optional<size_t> total_memory_bytes() { return proc_field_kb("/proc/meminfo", "MemTotal"); }

}  // namespace trainctl
