#include "launch/console.h"

#include <unistd.h>

#include <cerrno>

namespace trainctl::launch {

void write_console(int fd, std::string_view text) {
  if (fd < 0) return;
  while (!text.empty()) {
    ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    text.remove_prefix(static_cast<size_t>(n));
  }
}

}  // namespace trainctl::launch
