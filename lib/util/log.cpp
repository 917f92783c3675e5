#include "util/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace trainctl::log {

void init(int rank, int world_size, spdlog::level::level_enum level) {
  init_labelled(rank >= 0 ? "rank " + std::to_string(rank) + "/" + std::to_string(world_size) : "",
                level);
}

void init_labelled(const std::string& label, spdlog::level::level_enum level) {
  spdlog::drop("trainctl");
  auto logger = spdlog::stderr_color_mt("trainctl");
  if (!label.empty()) {
    logger->set_pattern("[" + label + "] %H:%M:%S.%e %^%l%$ %v");
  } else {
    logger->set_pattern("[trainctl] %^%l%$ %v");
  }
  logger->set_level(level);
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
}

}  // namespace trainctl::log
