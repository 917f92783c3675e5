#pragma once
// Global rank 0 writes user-facing output (progress line, benchmark tables, final
// summary) to the launcher's stdout through TRAINCTL_CONSOLE_FD; everything else a
// worker prints goes to its log file.
#include <string_view>

namespace trainctl::launch {

// Writes all of `text` to `fd`; does nothing when fd < 0 (ranks without a console).
// Errors (a closed terminal) are ignored: output to the console is never fatal.
void write_console(int fd, std::string_view text);

}  // namespace trainctl::launch
