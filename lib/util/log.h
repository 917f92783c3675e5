#pragma once
#include <spdlog/spdlog.h>

#include <string>

namespace trainctl::log {

// The logger is the only global mutable state (style rule). Workers call this once
// with their rank so every line carries "[rank r/world]"; the launcher uses rank -1.
void init(int rank, int world_size, spdlog::level::level_enum level = spdlog::level::info);
// The same with another label ("ps server 1"); empty: the launcher's "[trainctl]".
void init_labelled(const std::string& label, spdlog::level::level_enum level = spdlog::level::info);

}  // namespace trainctl::log
