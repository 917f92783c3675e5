// runtime.fault_tolerance through the binary (issue 32): a dp 3 x pp 2 run whose workers are
// killed at random steps keeps training without restarting the survivors (their pids
// stay), trains every step exactly once, and ends with bitwise the model of a run that
// replays its recorded membership without failures (runtime.fault_tolerance.replay).
// Below min_replicas the job falls back to a restart from its checkpoint.
#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "integration/helpers.h"

using namespace trainctl::test;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

constexpr int kReplicas = 3, kStages = 2;

fs::path write_ft_job(const fs::path& dir, const std::string& name, int steps,
                      const std::string& ft_extra = "", int dp = kReplicas, int pp = kStages,
                      int heartbeat_s = 10) {
  const fs::path file = dir / (name + ".yaml");
  // One job name for all: the exported model's metadata carries it.
  write_text(file, "name: ft\nrun_dir: runs/" + name +
                       "\nseed: 11\nmodel: {type: gpt, vocab_size: 64, seq_len: 16, n_layer: 2, "
                       "n_head: 2, d_model: 32}\ndata: {type: synthetic}\nparallel: {dp: " +
                       std::to_string(dp) + ", pp: " + std::to_string(pp) +
                       "}\ntraining: {steps: " + std::to_string(steps) +
                       ", micro_batch_size: 2, global_batch_size: " + std::to_string(4 * dp) +
                       ", threads: 1, eval_every: 0}\n"
                       "optimizer: {type: adamw, lr: 3.0e-3, warmup_steps: 5}\n"
                       "checkpoint: {every_steps: 50, keep_last: 2}\nlogging: {every_steps: 1}\n"
                       "runtime:\n  comm_timeout_s: 60\n  max_restarts: 1\n"
                       "  fault_tolerance: {enabled: true, heartbeat_timeout_s: " +
                       std::to_string(heartbeat_s) + ft_extra + "}\n");
  return file;
}

std::vector<json> json_lines(const fs::path& file) {
  std::vector<json> out;
  std::istringstream in(read_text(file));
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    json j = json::parse(line, nullptr, false);
    if (!j.is_discarded()) out.push_back(std::move(j));
  }
  return out;
}

int64_t last_step(const fs::path& metrics) {
  const std::vector<json> lines = json_lines(metrics);
  return lines.empty() ? 0 : lines.back().value("step", int64_t{0});
}

// The world rank of replica `replica`'s stage `stage` (tp 1: rank = pp * dp + dp).
int rank_of(int replica, int stage) { return stage * kReplicas + replica; }

// Every "worker started: pid N" of a rank's log, in order.
std::vector<pid_t> started_pids(const fs::path& log) {
  std::vector<pid_t> pids;
  const std::string text = read_text(log);
  const std::string mark = "worker started: pid ";
  for (size_t at = text.find(mark); at != std::string::npos; at = text.find(mark, at + 1)) {
    pids.push_back(static_cast<pid_t>(std::atol(text.c_str() + at + mark.size())));
  }
  return pids;
}

// membership.jsonl holds an epoch with `replica` at generation `generation`.
bool rejoined(const fs::path& membership, int replica, int generation) {
  for (const json& e : json_lines(membership)) {
    const auto rs = e.at("replicas").get<std::vector<int>>();
    const auto gs = e.at("generations").get<std::vector<int>>();
    for (size_t i = 0; i < rs.size(); ++i) {
      if (rs[i] == replica && gs[i] == generation) return true;
    }
  }
  return false;
}

// metrics.jsonl's lines: each of steps 1..steps exactly once, in order.
std::vector<json> every_step_once(const fs::path& run, int steps) {
  std::vector<json> metrics = json_lines(run / "metrics.jsonl");
  REQUIRE(metrics.size() == static_cast<size_t>(steps));
  for (int s = 0; s < steps; ++s) CHECK(metrics[static_cast<size_t>(s)].at("step") == s + 1);
  return metrics;
}

}  // namespace

TEST_CASE("fault tolerance: dp 3 x pp 2 survives 5 kills at random steps and equals its replay",
          "[launch][integration]") {
  TempDir dir("ft-kills");
  const int steps = 700;
  const fs::path job = write_ft_job(dir.path(), "kills", steps);
  const fs::path run = dir / "runs/kills";
  Proc p({"train", job.string()}, dir.path());
  REQUIRE(eventually([&] { return last_step(run / "metrics.jsonl") >= 5; }, 60s));
  std::map<int, pid_t> first_pid;
  for (int r = 0; r < kReplicas * kStages; ++r) {
    first_pid[r] = worker_pid_from_log(run / "logs" / ("rank" + std::to_string(r) + ".log"));
  }
  std::mt19937 rng(20261201);
  std::vector<int> kills(kReplicas, 0);
  int64_t previous = 0;
  for (int k = 0; k < 5; ++k) {
    // A random step some way past the previous kill's heal, a random replica and stage.
    const int64_t at = previous + 15 + static_cast<int64_t>(rng() % 20);
    REQUIRE(eventually([&] { return last_step(run / "metrics.jsonl") >= at; }, 120s));
    const int replica = static_cast<int>(rng() % kReplicas);
    const int stage = static_cast<int>(rng() % kStages);
    const int rank = rank_of(replica, stage);
    const pid_t victim =
        worker_pid_from_log(run / "logs" / ("rank" + std::to_string(rank) + ".log"));
    REQUIRE(victim > 0);
    INFO("kill " << k + 1 << ": rank " << rank << " (replica " << replica << ") near step " << at);
    REQUIRE(::kill(victim, SIGKILL) == 0);
    ++kills[static_cast<size_t>(replica)];
    REQUIRE(eventually(
        [&] {
          return rejoined(run / "membership.jsonl", replica, kills[static_cast<size_t>(replica)]);
        },
        120s));
    previous = last_step(run / "metrics.jsonl");
    REQUIRE(previous < steps);  // the kills land while the run trains
  }
  const ProcResult r = p.wait(300s);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("the other replicas keep training"));

  // The survivors kept their processes; each killed replica started once per kill more.
  for (int replica = 0; replica < kReplicas; ++replica) {
    for (int stage = 0; stage < kStages; ++stage) {
      const int rank = rank_of(replica, stage);
      const auto pids = started_pids(run / "logs" / ("rank" + std::to_string(rank) + ".log"));
      CHECK(pids.size() == static_cast<size_t>(1 + kills[static_cast<size_t>(replica)]));
      if (kills[static_cast<size_t>(replica)] == 0) CHECK(pids.back() == first_pid[rank]);
    }
  }

  // Every step exactly once, each with the replicas its epoch had.
  const std::vector<json> metrics = every_step_once(run, steps);
  const std::vector<json> epochs = json_lines(run / "membership.jsonl");
  // The last epoch has every replica, their restarts adding up to the kills.
  int restarts = 0;
  for (const json& g : epochs.back().at("generations")) restarts += g.get<int>();
  CHECK(epochs.back().at("replicas").size() == static_cast<size_t>(kReplicas));
  CHECK(restarts == 5);
  std::map<int64_t, size_t> live;  // first step -> replicas, later lines superseding
  for (const json& e : epochs) {
    const auto first = e.at("first_step").get<int64_t>();
    live.erase(live.lower_bound(first), live.end());
    live[first] = e.at("replicas").size();
  }
  for (const json& m : metrics) {
    const auto step = m.at("step").get<int64_t>();
    CHECK(m.at("replicas").get<size_t>() == std::prev(live.upper_bound(step))->second);
  }

  // The same job without failures, counting each step only the recorded replicas' batches.
  const fs::path replay =
      write_ft_job(dir.path(), "replay", steps, ", replay: " + (run / "membership.jsonl").string());
  const ProcResult rr = run_trainctl({"train", replay.string()}, dir.path(), 300s);
  INFO(rr.out << rr.err);
  REQUIRE(rr.exit_code == 0);
  const std::vector<json> replayed = json_lines(dir / "runs/replay/metrics.jsonl");
  REQUIRE(replayed.size() == metrics.size());
  for (size_t i = 0; i < metrics.size(); ++i) {
    INFO("step " << i + 1);
    CHECK(replayed[i].at("loss") == metrics[i].at("loss"));
    CHECK(replayed[i].at("grad_norm") == metrics[i].at("grad_norm"));
    CHECK(replayed[i].at("replicas") == metrics[i].at("replicas"));
  }
  CHECK(read_text(dir / "runs/replay/model.safetensors") == read_text(run / "model.safetensors"));
}

TEST_CASE("fault tolerance: below min_replicas the job restarts from its checkpoint",
          "[launch][integration]") {
  TempDir dir("ft-quorum");
  const int steps = 400;
  const fs::path job = write_ft_job(dir.path(), "quorum", steps, ", min_replicas: 2", 2, 1, 3);
  const fs::path run = dir / "runs/quorum";
  Proc p({"train", job.string()}, dir.path());
  REQUIRE(eventually([&] { return last_step(run / "metrics.jsonl") >= 60; }, 60s));
  // A hang, not a death: its launcher does not restart it, so the live replicas fall to
  // one (a killed replica's restart may join the very next epoch and keep two).
  const pid_t victim = worker_pid_from_log(run / "logs/rank1.log");
  REQUIRE(::kill(victim, SIGSTOP) == 0);
  const ProcResult r = p.wait(300s);
  ::kill(victim, SIGKILL);  // in case the launcher did not
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("restarting all workers (restart 1 of 1)"));
  CHECK_THAT(read_text(run / "logs/rank0.log"),
             Catch::Contains("below runtime.fault_tolerance.min_replicas 2"));
  every_step_once(run, steps);
}

TEST_CASE(
    "fault tolerance: a hung worker's replica is left out after the heartbeat timeout, "
    "and heals when it wakes",
    "[launch][integration]") {
  TempDir dir("ft-hang");
  const int steps = 1200;
  // The heartbeat timeout also bounds the epoch's collectives: the survivors go on after 3 s
  // instead of runtime.comm_timeout_s (60 s here).
  const fs::path job = write_ft_job(dir.path(), "hang", steps, "", kReplicas, kStages, 3);
  const fs::path run = dir / "runs/hang";
  Proc p({"train", job.string()}, dir.path());
  REQUIRE(eventually([&] { return last_step(run / "metrics.jsonl") >= 30; }, 60s));
  const pid_t hung = worker_pid_from_log(run / "logs/rank4.log");  // replica 1, stage 1
  REQUIRE(::kill(hung, SIGSTOP) == 0);
  auto without_1 = [&] {
    for (const json& e : json_lines(run / "membership.jsonl")) {
      if (e.at("replicas") == json::array({0, 2})) return true;
    }
    return false;
  };
  const bool left_out = eventually(without_1, 60s);
  const int64_t stopped_at = last_step(run / "metrics.jsonl");
  const bool went_on =
      left_out &&
      eventually([&] { return last_step(run / "metrics.jsonl") >= stopped_at + 20; }, 60s);
  ::kill(hung, SIGCONT);
  REQUIRE(left_out);
  REQUIRE(went_on);
  // Awake, it takes a peer's state and trains on; nobody was restarted.
  REQUIRE(eventually(
      [&] {
        return rejoined(run / "membership.jsonl", 1, 0) &&
               json_lines(run / "membership.jsonl").back().at("healed") == json::array({1});
      },
      60s));
  const ProcResult r = p.wait(300s);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  for (int rank = 0; rank < kReplicas * kStages; ++rank) {
    CHECK(started_pids(run / "logs" / ("rank" + std::to_string(rank) + ".log")).size() == 1);
  }
  every_step_once(run, steps);
}

TEST_CASE(
    "fault tolerance with DiLoCo: the same run without failures, and kills that miss "
    "sync rounds",
    "[launch][integration]") {
  TempDir dir("ft-diloco");
  const int steps = 600;
  auto diloco = [&](const std::string& name, bool ft) {
    const fs::path job = write_ft_job(dir.path(), name, steps);
    std::string text = read_text(job);
    text.replace(text.find("parallel: {dp: 3, pp: 2}"), 24,
                 "parallel: {dp: 3, pp: 2, dp_sync: diloco, sync_every: 4}");
    if (!ft) text.replace(text.find("enabled: true"), 13, "enabled: false");
    write_text(job, text);
    return job;
  };
  // Without failures the replicas meet over the epochs' groups exactly as over the DP group.
  const ProcResult plain =
      run_trainctl({"train", diloco("plain", false).string()}, dir.path(), 300s);
  INFO(plain.out << plain.err);
  REQUIRE(plain.exit_code == 0);
  const fs::path job = diloco("killed", true);
  const fs::path run = dir / "runs/killed";
  Proc p({"train", job.string()}, dir.path());
  REQUIRE(eventually([&] { return last_step(run / "metrics.jsonl") >= 30; }, 60s));
  for (int k = 0; k < 2; ++k) {
    const int rank = k == 0 ? rank_of(2, 1) : rank_of(0, 0);
    const int replica = k == 0 ? 2 : 0;
    const int64_t at = last_step(run / "metrics.jsonl");
    REQUIRE(::kill(worker_pid_from_log(run / "logs" / ("rank" + std::to_string(rank) + ".log")),
                   SIGKILL) == 0);
    REQUIRE(eventually([&] { return rejoined(run / "membership.jsonl", replica, 1); }, 120s));
    REQUIRE(eventually([&] { return last_step(run / "metrics.jsonl") >= at + 40; }, 120s));
  }
  const ProcResult r = p.wait(300s);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const std::vector<json> metrics = every_step_once(run, steps);
  const std::vector<json> reference = json_lines(dir / "runs/plain/metrics.jsonl");
  REQUIRE(reference.size() == metrics.size());
  // Up to the first kill, bitwise the plain run; the last loss still close to it.
  CHECK(metrics[20].at("loss") == reference[20].at("loss"));
  const double last = metrics.back().at("loss").get<double>();
  const double want = reference.back().at("loss").get<double>();
  CHECK(std::isfinite(last));
  CHECK(std::abs(last - want) < 0.2 * want);
  // The surviving replica 1 never restarted.
  for (int stage = 0; stage < kStages; ++stage) {
    CHECK(
        started_pids(run / "logs" / ("rank" + std::to_string(rank_of(1, stage)) + ".log")).size() ==
        1);
  }
}
