// parallel.mode: parameter_server through the real binary: server processes started and
// supervised by the launcher, workers pushing gradients and pulling parameters over TCP.
// What must hold exactly: max_staleness 0 is synchronous data parallelism (on any number
// of servers); a checkpoint holds the servers' state and resumes on another number of
// servers (or without servers) as if nothing happened. Asynchronous runs keep the token
// budget and the staleness bound with a slowed-down worker, and a server that dies is a
// failure the launcher restarts from the last checkpoint.
#include <catch2/catch.hpp>
#include <cmath>
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

fs::path job(const fs::path& dir, const std::string& parallel, int steps = 12,
             const std::string& runtime = "{comm_timeout_s: 60, comm_selftest: false}") {
  const fs::path file = dir / "job.yaml";
  write_text(file,
             "name: ps\nseed: 5\n"
             "model: {vocab_size: 64, seq_len: 16, n_layer: 2, n_head: 4, d_model: 32}\n"
             "data: {type: synthetic}\n"
             "parallel: " +
                 parallel +
                 "\n"
                 "training: {steps: " +
                 std::to_string(steps) +
                 ", micro_batch_size: 2, global_batch_size: 8, grad_clip: 0}\n"
                 "optimizer: {type: adamw, lr: 1.0e-2, warmup_steps: 2, min_lr: 1.0e-3}\n"
                 "checkpoint: {every_steps: 6, async: false}\n"
                 "logging: {every_steps: 1, tensorboard: false}\n"
                 "runtime: " +
                 runtime + "\n");
  return file;
}

ProcResult train(const fs::path& dir, const fs::path& spec, const std::string& run,
                 std::vector<std::string> extra = {},
                 std::vector<std::pair<std::string, std::string>> env = {}) {
  std::vector<std::string> args = {"train", spec.string(), "--set", "run_dir=" + run};
  args.insert(args.end(), extra.begin(), extra.end());
  Proc p(args, dir, env);
  return p.wait(std::chrono::seconds(180));
}

const std::string kPs = "{dp: 2, mode: parameter_server, parameter_server: {servers: ";

void require_same_losses(const std::vector<json>& a, const std::vector<json>& b, double tol) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("step " << a[i]["step"]);
    REQUIRE(a[i]["step"] == b[i]["step"]);
    CHECK(std::abs(a[i]["loss"].get<double>() - b[i]["loss"].get<double>()) <= tol);
  }
}

}  // namespace

TEST_CASE("parameter servers with max_staleness 0 are synchronous data parallelism", "[ps]") {
  TempDir dir("ps-sync");
  const fs::path sync = job(dir.path(), "{dp: 2}");
  REQUIRE(train(dir.path(), sync, "allreduce").exit_code == 0);
  const std::vector<json> reference = rows_of(dir / "allreduce");
  REQUIRE(reference.size() == 12);
  for (int servers : {1, 2, 3}) {
    INFO(servers << " server(s)");
    const std::string run = "ps" + std::to_string(servers);
    const ProcResult r = train(
        dir.path(), job(dir.path(), kPs + std::to_string(servers) + ", max_staleness: 0}}"), run);
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    const std::vector<json> rows = rows_of(dir / run);
    // The gradients of an update are averaged on the servers instead of summed in a ring:
    // float rounding only.
    require_same_losses(reference, rows, 2e-5);
    for (const json& row : rows) {
      // Every update is both workers' gradients of one step, none of them stale.
      CHECK(row["ps_gradients"] == 2);
      CHECK(row["ps_staleness_max"] == 0);
      CHECK(row["ps_staleness"][0] == 2);
    }
    CHECK(fs::exists(dir / run / "model.safetensors"));
    CHECK(fs::exists(dir / run / "logs" / ("server" + std::to_string(servers - 1) + ".log")));
    CHECK(r.out.find("parameter server") != std::string::npos);
  }
}

TEST_CASE("a parameter-server checkpoint resumes on another number of servers, and without",
          "[ps][resume]") {
  TempDir dir("ps-resume");
  const fs::path two = job(dir.path(), kPs + "2, max_staleness: 0}}");
  const ProcResult straight = train(dir.path(), two, "straight");
  INFO(straight.out << straight.err);
  REQUIRE(straight.exit_code == 0);
  const fs::path step6 = dir / "straight" / "checkpoints" / "step_00000006";
  REQUIRE(fs::exists(step6 / "metadata.json"));
  const std::vector<json> all = rows_of(dir / "straight");
  REQUIRE(all.size() == 12);
  const std::vector<json> tail(all.begin() + 6, all.end());

  // One server instead of two: each element's update is the same arithmetic.
  const ProcResult one = train(dir.path(), job(dir.path(), kPs + "1, max_staleness: 0}}"), "one",
                               {"--resume", step6.string()});
  INFO(one.out << one.err);
  REQUIRE(one.exit_code == 0);
  std::vector<json> rows = rows_of(dir / "one");
  REQUIRE(rows.size() == 6);
  require_same_losses(tail, rows, 0.0);
  CHECK(read_text(dir / "straight" / "model.safetensors") ==
        read_text(dir / "one" / "model.safetensors"));

  // Plain synchronous DP reads the same checkpoint (parameters and AdamW state).
  const ProcResult dp =
      train(dir.path(), job(dir.path(), "{dp: 2}"), "dp", {"--resume", step6.string()});
  INFO(dp.out << dp.err);
  REQUIRE(dp.exit_code == 0);
  require_same_losses(tail, rows_of(dir / "dp"), 2e-5);
}

TEST_CASE("asynchronous servers with a slow worker keep the budget and the staleness bound",
          "[ps]") {
  TempDir dir("ps-async");
  const fs::path spec = job(dir.path(), kPs + "2, max_staleness: 2}}", 24);
  const ProcResult r = train(dir.path(), spec, "async", {}, {{"TRAINCTL_TEST_SLOWDOWN", "1:4"}});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const std::vector<json> rows = rows_of(dir / "async");
  REQUIRE(!rows.empty());
  int64_t gradients = 0, stale = 0;
  for (const json& row : rows) {
    gradients += row["ps_gradients"].get<int64_t>();
    CHECK(row["ps_staleness_max"].get<int64_t>() <= 2);
    const std::vector<int64_t> hist = row["ps_staleness"].get<std::vector<int64_t>>();
    REQUIRE(hist.size() == 3);
    stale += hist[1] + hist[2];
    CHECK(std::isfinite(row["loss"].get<double>()));
  }
  // The budget is 24 steps of both workers' shares; a worker in the middle of a step when
  // it is spent still delivers that one. Worker 0's metrics count every gradient applied,
  // the slow worker's last ones too (they come with the final state).
  CHECK(gradients >= 48);
  CHECK(gradients <= 49);
  CHECK(rows.back()["step"].get<int64_t>() >= 24);
  // The fast worker did not wait for the slow one at every step: some gradients were stale.
  CHECK(stale > 0);
  CHECK(fs::exists(dir / "async" / "checkpoints" / "latest"));
}

TEST_CASE("a parameter server that dies fails the attempt, which restarts from the checkpoint",
          "[ps][failure]") {
  TempDir dir("ps-kill");
  const fs::path spec = job(dir.path(), kPs + "2, max_staleness: 0}}", 120,
                            "{comm_timeout_s: 60, comm_selftest: false, max_restarts: 1}");
  Proc p({"train", spec.string(), "--set", "run_dir=run"}, dir.path(),
         {{"TRAINCTL_TEST_SLOWDOWN", "0:3"}});
  const fs::path ckpt = dir / "run" / "checkpoints" / "step_00000006" / "metadata.json";
  REQUIRE(eventually([&] { return fs::exists(ckpt); }, std::chrono::seconds(120)));
  const std::string log = read_text(dir / "run" / "logs" / "server1.log");
  const size_t at = log.rfind("started: pid ");
  REQUIRE(at != std::string::npos);
  const pid_t server = static_cast<pid_t>(std::atol(log.c_str() + at + 13));
  REQUIRE(server > 0);
  ::kill(server, SIGKILL);
  const ProcResult r = p.wait(std::chrono::seconds(180));
  INFO(r.out << r.err);
  CHECK(r.err.find("parameter server 1") != std::string::npos);
  REQUIRE(r.exit_code == 0);
  const std::vector<json> rows = rows_of(dir / "run");
  REQUIRE(!rows.empty());
  CHECK(rows.back()["step"] == 120);
  CHECK(read_text(dir / "run" / "logs" / "server1.log").find("attempt 1") != std::string::npos);
}
