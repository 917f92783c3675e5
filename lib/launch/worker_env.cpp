#include "launch/worker_env.h"

#include <charconv>
#include <cstdlib>

#include "util/error.h"

namespace trainctl::launch {
namespace {

std::string require(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') {
    throw InputError(std::string("environment variable ") + name +
                     " is not set: `trainctl worker` is started by the launcher "
                     "(trainctl train/selftest/bench), not by hand");
  }
  return v;
}

int require_int(const char* name) {
  std::string text = require(name);
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) {
    throw InputError(std::string("environment variable ") + name + "='" + text +
                     "' is not an integer");
  }
  return value;
}

WorkerMode parse_mode(const std::string& text) {
  if (text == "train") return WorkerMode::train;
  if (text == "selftest") return WorkerMode::selftest;
  if (text == "bench-comm") return WorkerMode::bench_comm;
  throw InputError("environment variable TRAINCTL_MODE='" + text +
                   "' is not one of train, selftest, bench-comm");
}

}  // namespace

const char* to_string(WorkerMode mode) {
  switch (mode) {
    case WorkerMode::train:
      return "train";
    case WorkerMode::selftest:
      return "selftest";
    case WorkerMode::bench_comm:
      return "bench-comm";
  }
  return "?";
}

WorkerEnv read_worker_env() {
  WorkerEnv e;
  e.rank = require_int("TRAINCTL_RANK");
  e.local_rank = require_int("TRAINCTL_LOCAL_RANK");
  e.world_size = require_int("TRAINCTL_WORLD_SIZE");
  e.node_rank = require_int("TRAINCTL_NODE_RANK");
  e.nnodes = require_int("TRAINCTL_NNODES");
  e.store_addr = require("TRAINCTL_STORE_ADDR");
  e.store_port = require_int("TRAINCTL_STORE_PORT");
  e.token = require("TRAINCTL_TOKEN");
  e.node_addr = require("TRAINCTL_NODE_ADDR");
  e.run_dir = require("TRAINCTL_RUN_DIR");
  e.config = require("TRAINCTL_CONFIG");
  e.mode = parse_mode(require("TRAINCTL_MODE"));
  e.restart = require_int("TRAINCTL_RESTART");
  e.console_fd = std::getenv("TRAINCTL_CONSOLE_FD") ? require_int("TRAINCTL_CONSOLE_FD") : -1;
  if (e.world_size < 1 || e.rank < 0 || e.rank >= e.world_size) {
    throw InputError("TRAINCTL_RANK=" + std::to_string(e.rank) + " is outside [0, " +
                     "TRAINCTL_WORLD_SIZE=" + std::to_string(e.world_size) + ")");
  }
  return e;
}

std::vector<std::pair<std::string, std::string>> worker_env_vars(const WorkerEnv& e) {
  std::vector<std::pair<std::string, std::string>> vars = {
      {"TRAINCTL_RANK", std::to_string(e.rank)},
      {"TRAINCTL_LOCAL_RANK", std::to_string(e.local_rank)},
      {"TRAINCTL_WORLD_SIZE", std::to_string(e.world_size)},
      {"TRAINCTL_NODE_RANK", std::to_string(e.node_rank)},
      {"TRAINCTL_NNODES", std::to_string(e.nnodes)},
      {"TRAINCTL_STORE_ADDR", e.store_addr},
      {"TRAINCTL_STORE_PORT", std::to_string(e.store_port)},
      {"TRAINCTL_TOKEN", e.token},
      {"TRAINCTL_NODE_ADDR", e.node_addr},
      {"TRAINCTL_RUN_DIR", e.run_dir.string()},
      {"TRAINCTL_CONFIG", e.config.string()},
      {"TRAINCTL_MODE", to_string(e.mode)},
      {"TRAINCTL_RESTART", std::to_string(e.restart)},
  };
  if (e.console_fd >= 0) vars.emplace_back("TRAINCTL_CONSOLE_FD", std::to_string(e.console_fd));
  return vars;
}

void export_worker_env(const WorkerEnv& env) {
  ::unsetenv("TRAINCTL_CONSOLE_FD");
  for (const auto& [name, value] : worker_env_vars(env)) ::setenv(name.c_str(), value.c_str(), 1);
}

}  // namespace trainctl::launch
