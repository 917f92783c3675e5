#pragma once
// What the kernel says about this process's memory (Linux /proc/self/status and
// /proc/meminfo); empty where the file or the field is missing (other systems, sandboxes).
#include <cstddef>
#include <optional>

namespace trainctl {

// VmHWM: the peak resident set size of this process so far, in bytes.
std::optional<size_t> peak_rss_bytes();
// MemTotal: the physical memory of this machine, in bytes.
std::optional<size_t> total_memory_bytes();

}  // namespace trainctl
