#include "launch/worker_env.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>

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

// Optional settings: unset or empty gives nullopt.
std::optional<std::string> optional_var(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

std::optional<long long> optional_number(const char* name) {
  const std::optional<std::string> text = optional_var(name);
  if (!text) return std::nullopt;
  long long value = 0;
  auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), value);
  if (ec != std::errc() || end != text->data() + text->size() || value < 0) {
    throw InputError(std::string("environment variable ") + name + "='" + *text +
                     "' is not a non-negative integer");
  }
  return value;
}

TestHooks read_test_hooks() {
  TestHooks hooks;
  hooks.stall = optional_var(kStallHookVariable).value_or("");
  // As std::atoll: a test sets it, a malformed value is 0 (no checkpoint has step 0).
  if (const char* crash = std::getenv(kCrashInCheckpointVariable)) {
    hooks.crash_in_checkpoint_step = std::atoll(crash);
  }
  // RANK:FACTOR; malformed or out of range: off (a test hook, not user input).
  if (const char* slow = std::getenv(kSlowdownVariable)) {
    int rank = -1;
    double factor = 0;
    if (std::sscanf(slow, "%d:%lf", &rank, &factor) == 2 && rank >= 0 && factor >= 1.0) {
      hooks.slowdown_rank = rank;
      hooks.slowdown_factor = factor;
    }
  }
  if (const char* log = std::getenv(kBatchLogVariable)) hooks.batch_log = std::string(log) == "1";
  return hooks;
}

WorkerMode parse_mode(const std::string& text) {
  if (text == "train") return WorkerMode::train;
  if (text == "selftest") return WorkerMode::selftest;
  if (text == "bench-comm") return WorkerMode::bench_comm;
  if (text == "eval") return WorkerMode::eval;
  throw InputError("environment variable TRAINCTL_MODE='" + text +
                   "' is not one of train, selftest, bench-comm, eval");
}

}  // namespace

const char* to_string(WorkerMode mode) {
  switch (mode) {
    case WorkerMode::train:
      return "train";
    case WorkerMode::selftest:
      return "selftest";
    case WorkerMode::eval:
      return "eval";
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
  e.ps_server = std::getenv("TRAINCTL_PS_SERVER") ? require_int("TRAINCTL_PS_SERVER") : -1;
  e.ft_generation =
      std::getenv("TRAINCTL_FT_GENERATION") ? require_int("TRAINCTL_FT_GENERATION") : 0;
  if (e.ps_server >= 0) {
    if (e.rank != e.world_size + e.ps_server) {
      throw InputError("TRAINCTL_RANK=" + std::to_string(e.rank) + " of parameter server " +
                       std::to_string(e.ps_server) + " must be TRAINCTL_WORLD_SIZE + " +
                       "TRAINCTL_PS_SERVER = " + std::to_string(e.world_size + e.ps_server));
    }
  } else if (e.world_size < 1 || e.rank < 0 || e.rank >= e.world_size) {
    throw InputError("TRAINCTL_RANK=" + std::to_string(e.rank) + " is outside [0, " +
                     "TRAINCTL_WORLD_SIZE=" + std::to_string(e.world_size) + ")");
  }
  e.resume = optional_var("TRAINCTL_RESUME").value_or("");
  e.selftest_repeat = std::max(1LL, optional_number("TRAINCTL_SELFTEST_REPEAT").value_or(1));
  e.selftest_quick = optional_number("TRAINCTL_SELFTEST_QUICK").value_or(0) != 0;
  e.bench_min_bytes = optional_number("TRAINCTL_BENCH_MIN_BYTES");
  e.bench_max_bytes = optional_number("TRAINCTL_BENCH_MAX_BYTES");
  e.bench_iters = optional_number("TRAINCTL_BENCH_ITERS");
  e.hooks = read_test_hooks();
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
  if (e.ps_server >= 0) vars.emplace_back("TRAINCTL_PS_SERVER", std::to_string(e.ps_server));
  if (e.ft_generation > 0) {
    vars.emplace_back("TRAINCTL_FT_GENERATION", std::to_string(e.ft_generation));
  }
  return vars;
}

void export_worker_env(const WorkerEnv& env) {
  ::unsetenv("TRAINCTL_CONSOLE_FD");
  ::unsetenv("TRAINCTL_PS_SERVER");
  ::unsetenv("TRAINCTL_FT_GENERATION");
  for (const auto& [name, value] : worker_env_vars(env)) ::setenv(name.c_str(), value.c_str(), 1);
}

}  // namespace trainctl::launch
