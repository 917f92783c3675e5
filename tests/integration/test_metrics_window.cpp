// A logged metrics line's per-step counters mean one thing in every mode: a mean per step
// over the window since the previous logged line (docs/observability.md), with the window's
// total under a name that says so (comm_bytes_window). Under local SGD with sync_every 4 a
// line every 10 steps must not alternate between 0 and a whole parameter exchange, and
// parameter-server lines must not show the bytes of several steps as one step's.
#include <catch2/catch.hpp>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "integration/helpers.h"

using namespace trainctl::test;
using nlohmann::json;

namespace {

std::vector<json> rows_of(const fs::path& run) {
  std::vector<json> out;
  std::istringstream in(read_text(run / "metrics.jsonl"));
  for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
  return out;
}

fs::path job(const fs::path& dir, const std::string& parallel, int steps, int log_every) {
  const fs::path file = dir / "job.yaml";
  write_text(file,
             "name: window\nseed: 5\n"
             "model: {vocab_size: 64, seq_len: 16, n_layer: 2, n_head: 4, d_model: 32}\n"
             "data: {type: synthetic}\n"
             "parallel: " +
                 parallel +
                 "\n"
                 "training: {steps: " +
                 std::to_string(steps) +
                 ", micro_batch_size: 2, global_batch_size: 8, grad_clip: 0}\n"
                 "optimizer: {type: adamw, lr: 1.0e-2, warmup_steps: 2, min_lr: 1.0e-3}\n"
                 "checkpoint: {every_steps: 0, async: false}\n"
                 "logging: {every_steps: " +
                 std::to_string(log_every) +
                 ", tensorboard: false}\n"
                 "runtime: {comm_timeout_s: 60, comm_selftest: false}\n");
  return file;
}

std::vector<json> train(const fs::path& dir, const fs::path& spec, const std::string& run) {
  Proc p({"train", spec.string(), "--set", "run_dir=" + run}, dir);
  const ProcResult r = p.wait(std::chrono::seconds(180));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  return rows_of(dir / run);
}

// Steps of the window each line covers: since the previous line's step.
std::vector<int64_t> window_steps(const std::vector<json>& rows) {
  std::vector<int64_t> out;
  int64_t previous = 0;
  for (const json& row : rows) {
    const auto step = row["step"].get<int64_t>();
    out.push_back(step - previous);
    previous = step;
  }
  return out;
}

// A line's comm_bytes is its window's total spread over the window's steps.
void check_mean_of_window(const std::vector<json>& rows) {
  const std::vector<int64_t> n = window_steps(rows);
  for (size_t i = 0; i < rows.size(); ++i) {
    INFO("step " << rows[i]["step"]);
    const auto total = rows[i].value("comm_bytes_window", int64_t{-1});
    CHECK(total >= 0);
    CHECK(rows[i]["comm_bytes"].get<int64_t>() ==
          static_cast<int64_t>(std::llround(static_cast<double>(total) / n[i])));
  }
}

std::vector<int64_t> column(const std::vector<json>& rows, const char* key) {
  std::vector<int64_t> out;
  for (const json& row : rows) out.push_back(row.value(key, int64_t{-1}));
  return out;
}

}  // namespace

TEST_CASE("comm_bytes is a mean per step over the logging window, in every DP mode",
          "[metrics][dp_sync]") {
  TempDir dir("metrics-window");
  // Synchronous allreduce: the same bytes every step, so every line has them whatever the
  // window; the window total is that times the window's steps.
  const std::vector<json> every = train(dir.path(), job(dir.path(), "{dp: 2}", 10, 1), "every");
  const std::vector<json> a = train(dir.path(), job(dir.path(), "{dp: 2}", 10, 5), "a");
  REQUIRE(every.size() == 10);
  REQUIRE(column(a, "step") == std::vector<int64_t>{1, 5, 10});
  const int64_t exchange = every[0]["comm_bytes"].get<int64_t>();
  REQUIRE(exchange > 0);
  for (const json& row : every) CHECK(row["comm_bytes"].get<int64_t>() == exchange);
  CHECK(column(a, "comm_bytes") == std::vector<int64_t>(3, exchange));
  CHECK(column(a, "comm_bytes_window") ==
        std::vector<int64_t>{exchange, 4 * exchange, 5 * exchange});
  check_mean_of_window(a);
  for (const json& row : a) CHECK(row.contains("comm_ms"));

  // Local SGD, sync_every 4 (exchanges on steps 4, 8, ..., 40: the parameters are the
  // gradients' size), a line every 10 steps: each line spreads its window's exchanges
  // over its steps instead of showing 0 or a whole exchange.
  const std::vector<json> l = train(
      dir.path(), job(dir.path(), "{dp: 2, dp_sync: local_sgd, sync_every: 4}", 40, 10), "local");
  REQUIRE(column(l, "step") == std::vector<int64_t>{1, 10, 20, 30, 40});
  // Exchanges in the windows 1, 2..10, 11..20, 21..30, 31..40.
  const std::vector<int64_t> exchanges = {0, 2, 3, 2, 3};
  const std::vector<int64_t> n = window_steps(l);
  int64_t total = 0;
  for (size_t i = 0; i < l.size(); ++i) {
    INFO("step " << l[i]["step"]);
    const double per_step = static_cast<double>(exchanges[i] * exchange) / n[i];
    CHECK(l[i]["comm_bytes"].get<int64_t>() == std::llround(per_step));
    CHECK(l[i].value("comm_bytes_window", int64_t{-1}) == exchanges[i] * exchange);
    total += l[i].value("comm_bytes_window", int64_t{0});
  }
  // Every line after the first lies between a fifth and a third of an exchange per step.
  for (size_t i = 1; i < l.size(); ++i) {
    CHECK(l[i]["comm_bytes"].get<int64_t>() * 5 >= exchange);
    CHECK(l[i]["comm_bytes"].get<int64_t>() * 3 <= exchange);
  }
  CHECK(total == 10 * exchange);
  check_mean_of_window(l);
}

TEST_CASE("parameter servers: comm_bytes per global step over the window, as in allreduce",
          "[metrics][ps]") {
  TempDir dir("metrics-window-ps");
  const std::string ps =
      "{dp: 2, mode: parameter_server, parameter_server: {servers: 1, "
      "max_staleness: 0}}";
  // Synchronous servers: worker 0 pushes its gradient once per global step.
  const std::vector<json> every = train(dir.path(), job(dir.path(), ps, 12, 1), "every");
  REQUIRE(every.size() == 12);
  const int64_t push = every[0]["comm_bytes"].get<int64_t>();
  REQUIRE(push > 0);
  for (const json& row : every) CHECK(row["comm_bytes"].get<int64_t>() == push);
  const std::vector<json> w = train(dir.path(), job(dir.path(), ps, 12, 4), "windowed");
  REQUIRE(column(w, "step") == std::vector<int64_t>{1, 4, 8, 12});
  CHECK(column(w, "comm_bytes") == std::vector<int64_t>(4, push));
  check_mean_of_window(w);
  CHECK(column(w, "comm_bytes_window") == std::vector<int64_t>{push, 3 * push, 4 * push, 4 * push});
}
