// End-to-end training through the real binary: outputs, layout equivalence for data
// parallelism, refusal of what this build cannot train, bad numerics, and learning real
// text (tinyshakespeare, when ../shared/data has it).
#include <catch2/catch.hpp>
#include <cmath>
#include <nlohmann/json.hpp>

#include "checkpoint/safetensors.h"
#include "integration/helpers.h"

using namespace trainctl::test;
using nlohmann::json;

namespace {

std::vector<json> metrics_of(const fs::path& run_dir) {
  std::vector<json> rows;
  std::istringstream in(read_text(run_dir / "metrics.jsonl"));
  for (std::string line; std::getline(in, line);) rows.push_back(json::parse(line));
  return rows;
}

// A small job; `extra` lines are appended (later keys of a section must not repeat it).
fs::path tiny_job(const fs::path& dir, const std::string& name, const std::string& parallel,
                  const std::string& training) {
  const fs::path file = dir / (name + ".yaml");
  write_text(file, "name: " + name +
                       "\nseed: 7\n"
                       "model: {vocab_size: 64, seq_len: 32, n_layer: 2, n_head: 2, d_model: 32}\n"
                       "data: {type: synthetic}\n"
                       "parallel: " +
                       parallel + "\n" + "training: " + training + "\n" +
                       "optimizer: {lr: 1.0e-2, warmup_steps: 2}\n"
                       "logging: {every_steps: 1}\n"
                       "runtime: {comm_timeout_s: 30}\n");
  return file;
}

}  // namespace

TEST_CASE("train writes metrics, resolved config, logs and a loadable model", "[train]") {
  TempDir dir("train");
  const fs::path job = tiny_job(dir.path(), "basic", "{dp: 1}",
                                "{steps: 12, micro_batch_size: 4, global_batch_size: 4, "
                                "eval_every: 6, eval_batches: 2}");
  const ProcResult r = run_trainctl({"train", job.string()}, dir.path());
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const fs::path run = dir.path() / "runs" / "basic";
  CHECK(fs::exists(run / "config.resolved.yaml"));
  CHECK(fs::exists(run / "logs" / "rank0.log"));
  CHECK_THAT(read_text(run / "logs" / "rank0.log"), Catch::Contains("[rank 0/1]"));
  const auto rows = metrics_of(run);
  REQUIRE(rows.size() == 12);
  for (const auto& row : rows) {
    for (const char* key : {"step", "loss", "lr", "grad_norm", "tokens_per_s", "step_ms"}) {
      CHECK(row.contains(key));
    }
  }
  CHECK(rows[5].contains("val_loss"));
  CHECK_FALSE(rows[4].contains("val_loss"));
  CHECK(rows.back()["loss"].get<double>() < rows.front()["loss"].get<double>() - 0.3);
  // The console shows the progress lines and the summary.
  CHECK_THAT(r.out, Catch::Contains("step 12/12"));
  CHECK_THAT(r.out, Catch::Contains("done: 12 steps"));

  const auto tensors = trainctl::checkpoint::read_safetensors(run / "model.safetensors");
  REQUIRE(tensors.size() == 2 + 2 * 12 + 2);
  CHECK(tensors.front().name == "transformer.wte.weight");
  CHECK(tensors.front().tensor.shape() == trainctl::Shape{64, 32});
}

TEST_CASE("data parallel layouts reproduce the single-worker loss curve", "[train][layout]") {
  // Same seed, data and global batch (8 sequences): dp 1 with 2 micro-batches, dp 2 with
  // one each, dp 4 with micro-batches of 2. Per-step losses must agree to float tolerance
  // (only the summation order of gradients differs).
  TempDir dir("layout");
  const std::string training = "{steps: 8, global_batch_size: 8, micro_batch_size: ";
  struct Case {
    std::string name, parallel, mb, set = "runtime.allreduce_algo=auto";
  };
  const std::vector<Case> cases = {
      {"dp1", "{dp: 1}", "4"},
      {"dp2", "{dp: 2}", "4"},
      {"dp4", "{dp: 4}", "2"},
      {"dp2-zero1", "{dp: 2, zero: 1}", "4"},
      {"dp2-zero2", "{dp: 2, zero: 2}", "2"},
      {"dp2-half-layer-buckets", "{dp: 2, bucket_mb: 0.001}", "2"},
      {"dp2-big-buckets", "{dp: 2, bucket_mb: 64}", "4"},
      {"dp4-halving-doubling", "{dp: 4}", "2", "runtime.allreduce_algo=halving_doubling"},
      // auto goes through shared memory here; these pin each transport explicitly.
      {"dp2-tcp-ring", "{dp: 2}", "4", "runtime.allreduce_algo=ring"},
      {"dp2-zero2-tcp-ring", "{dp: 2, zero: 2}", "2", "runtime.allreduce_algo=ring"},
      {"dp4-zero1-shm", "{dp: 4, zero: 1}", "2", "runtime.allreduce_algo=shm"}};
  std::vector<std::vector<double>> curves;
  for (const Case& c : cases) {
    const fs::path job = tiny_job(dir.path(), c.name, c.parallel, training + c.mb + "}");
    const ProcResult r = run_trainctl({"train", job.string(), "--set", c.set}, dir.path());
    INFO(c.name << "\n" << r.out << r.err);
    REQUIRE(r.exit_code == 0);
    std::vector<double> losses;
    for (const auto& row : metrics_of(dir.path() / "runs" / c.name)) {
      losses.push_back(row["loss"].get<double>());
    }
    REQUIRE(losses.size() == 8);
    curves.push_back(losses);
  }
  // Tolerance: relative 2e-5 per step. fp32 sums in another order differ by ~1e-7
  // relative per step; 8 steps of AdamW amplify that to ~1e-6 here.
  for (size_t k = 1; k < curves.size(); ++k) {
    for (size_t s = 0; s < curves[0].size(); ++s) {
      INFO(cases[k].name << " step " << s + 1);
      CHECK(curves[k][s] == Approx(curves[0][s]).epsilon(2e-5));
    }
  }
}

TEST_CASE("bf16 gradient communication stays close to fp32", "[train][layout]") {
  // bf16 keeps 8 bits of mantissa on the wire (accumulation stays fp32): a relative
  // gradient error of ~2^-9 per element, which moves 8 steps of losses by well under 1e-3.
  TempDir dir("bf16");
  std::vector<std::vector<double>> curves;
  for (const std::string comm : {"fp32", "bf16"}) {
    const fs::path job = tiny_job(dir.path(), "dp2-" + comm, "{dp: 2, grad_comm: " + comm + "}",
                                  "{steps: 8, global_batch_size: 8, micro_batch_size: 4}");
    const ProcResult r = run_trainctl({"train", job.string()}, dir.path());
    INFO(comm << "\n" << r.out << r.err);
    REQUIRE(r.exit_code == 0);
    std::vector<double> losses;
    for (const auto& row : metrics_of(dir.path() / "runs" / ("dp2-" + comm))) {
      losses.push_back(row["loss"].get<double>());
      CHECK(row.contains("comm_ms"));
      CHECK(row.contains("exposed_comm_ms"));
    }
    curves.push_back(losses);
  }
  double worst = 0;
  for (size_t s = 0; s < curves[0].size(); ++s) {
    worst = std::max(worst, std::abs(curves[1][s] - curves[0][s]) / curves[0][s]);
  }
  INFO("worst relative loss difference " << worst);
  CHECK(worst < 1e-3);
  CHECK(worst > 0);  // the bf16 path really ran
}

TEST_CASE("ZeRO shards optimizer state over the DP group", "[train]") {
  TempDir dir("zero");
  std::vector<double> state;
  for (const std::string z : {"0", "2"}) {
    const fs::path job = tiny_job(dir.path(), "z" + z, "{dp: 2, zero: " + z + "}",
                                  "{steps: 2, global_batch_size: 4, micro_batch_size: 2}");
    const ProcResult r = run_trainctl({"train", job.string()}, dir.path());
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    state.push_back(metrics_of(dir.path() / "runs" / ("z" + z)).back()["optimizer_state_mb"]);
  }
  CHECK(state[1] == Approx(state[0] / 2).epsilon(0.02));
}

TEST_CASE("SIGTERM stops training at a step boundary and keeps the results", "[train]") {
  TempDir dir("sigterm");
  const fs::path job = tiny_job(dir.path(), "long", "{dp: 2}",
                                "{steps: 100000, global_batch_size: 4, micro_batch_size: 2}");
  Proc p({"train", job.string()}, dir.path());
  const fs::path run = dir.path() / "runs" / "long";
  REQUIRE(eventually(
      [&] {
        return fs::exists(run / "metrics.jsonl") && read_text(run / "metrics.jsonl").size() > 200;
      },
      std::chrono::seconds(30)));
  ::kill(p.pid(), SIGTERM);
  const ProcResult r = p.wait(std::chrono::seconds(30));
  INFO(r.out << r.err);
  CHECK(r.exit_code == 4);
  CHECK_THAT(r.out, Catch::Contains("stopped: "));
  CHECK(fs::exists(run / "model.safetensors"));
  CHECK(processes_mentioning(run.string()).empty());
}

TEST_CASE("train refuses what this build cannot train, before spawning", "[train]") {
  TempDir dir("refuse");
  const fs::path job = tiny_job(dir.path(), "zero-sgd", "{dp: 2, zero: 1}",
                                "{steps: 2, micro_batch_size: 2, global_batch_size: 4}");
  const ProcResult r =
      run_trainctl({"train", job.string(), "--set", "optimizer.type=sgd"}, dir.path());
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("parallel.zero"));
  CHECK_FALSE(fs::exists(dir.path() / "runs" / "zero-sgd" / "logs"));
  // The same spec is fine for validate.
  CHECK(run_trainctl({"validate", job.string(), "--set", "optimizer.type=sgd"}, dir.path())
            .exit_code == 0);
}

TEST_CASE("a NaN loss stops the run and names the step", "[train]") {
  TempDir dir("nan");
  fs::path job = tiny_job(dir.path(), "nan", "{dp: 1}",
                          "{steps: 50, micro_batch_size: 2, global_batch_size: 2, grad_clip: 0}");
  // The largest learning rate a spec accepts (10), with plain SGD and no clipping, diverges.
  const std::vector<std::string> diverge = {"--set", "optimizer.type=sgd", "--set",
                                            "optimizer.lr=10"};
  std::vector<std::string> args = {"train", job.string()};
  args.insert(args.end(), diverge.begin(), diverge.end());
  const ProcResult r = run_trainctl(args, dir.path());
  INFO(r.out << r.err);
  CHECK(r.exit_code == 3);
  CHECK_THAT(r.out + r.err, Catch::Contains("bad numerics at step"));
  CHECK_THAT(r.out + r.err, !Catch::Contains("fp16's range"));
  // In fp16 the weights soon overflow the forward pass, which loss scaling cannot skip
  // past: the error says so and points at bf16.
  args.insert(args.end(), {"--set", "precision.compute=fp16"});
  const ProcResult half = run_trainctl(args, dir.path());
  INFO(half.out << half.err);
  CHECK(half.exit_code == 3);
  CHECK_THAT(half.out + half.err, Catch::Contains("bad numerics at step"));
  CHECK_THAT(half.out + half.err, Catch::Contains("left fp16's range"));
}

TEST_CASE("learns tinyshakespeare well below its unigram entropy", "[train][data]") {
  const fs::path corpus =
      fs::path(TRAINCTL_SOURCE_DIR) / ".." / "shared" / "data" / "tinyshakespeare.txt";
  if (!fs::exists(corpus)) {
    WARN("skipped: " << corpus << " is not present");
    return;
  }
  TempDir dir("shakespeare");
  const fs::path job = dir / "shakespeare.yaml";
  write_text(job,
             "name: shakespeare\nseed: 1337\n"
             "model: {vocab_size: 256, seq_len: 64, n_layer: 2, n_head: 4, d_model: 128}\n"
             "data: {type: text, path: " +
                 fs::canonical(corpus).string() +
                 ", val_fraction: 0.1}\n"
                 "training: {steps: 250, micro_batch_size: 16, global_batch_size: 16, "
                 "eval_every: 250, eval_batches: 8, threads: 2}\n"
                 "optimizer: {lr: 3.0e-3, warmup_steps: 20, min_lr: 3.0e-4}\n"
                 "logging: {every_steps: 50}\n");
  const ProcResult r = run_trainctl({"train", job.string()}, dir.path(), std::chrono::minutes(5));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const auto rows = metrics_of(dir.path() / "runs" / "shakespeare");
  const double val = rows.back()["val_loss"].get<double>();
  // The byte unigram entropy of the text is about 3.3 nats; a model that learned only
  // letter frequencies sits there. Context must take it well below.
  const size_t at = r.out.find("unigram entropy ");
  REQUIRE(at != std::string::npos);
  const double unigram = std::stod(r.out.substr(at + 16));
  INFO("val_loss " << val << " unigram entropy " << unigram);
  CHECK(unigram > 3.0);
  CHECK(val < unigram - 0.8);
}
