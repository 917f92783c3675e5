#pragma once
// Text shared by the `trainctl ckpt` subcommands.
#include <cstdint>
#include <cstdio>
#include <string>

namespace trainctl::app {

// "1.5 MiB".
inline std::string size_text(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char text[32];
  std::snprintf(text, sizeof text, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return text;
}

}  // namespace trainctl::app
