// Context parallelism in the layout-equivalence matrix (DESIGN.md, "How correctness is
// proven"): the same job trained with each sequence split over cp = 2 or 4 ranks (ring
// attention), alone and with dp, tp, pp and ZeRO, gives one worker's losses, gradient norms and
// validation loss within 2e-5, for both model families; a checkpoint written at one cp
// resumes at another; what cp does not compose with yet is refused at validate.
#include <algorithm>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sstream>

#include "integration/helpers.h"
#include "integration/rounding_bounds.h"

using namespace trainctl::test;
using nlohmann::json;

namespace {

const std::string kGptModel = "{vocab_size: 64, seq_len: 16, n_layer: 2, n_head: 4, d_model: 32}";
const std::string kLlamaModel =
    "{type: llama, vocab_size: 64, seq_len: 16, n_layer: 2, n_head: 4, n_kv_head: 2, "
    "d_model: 32, ffn_hidden: 48}";

std::string job_text(const std::string& name, const std::string& model, const std::string& parallel,
                     int steps, const std::string& extra = "") {
  return "name: " + name + "\nseed: 11\nmodel: " + model +
         "\ndata: {type: synthetic}\nparallel: " + parallel +
         "\ntraining: {steps: " + std::to_string(steps) +
         ", micro_batch_size: 2, global_batch_size: 8, eval_every: " + std::to_string(steps) +
         ", eval_batches: 2}\noptimizer: {lr: 1.0e-2, warmup_steps: 1, min_lr: 1.0e-3}\n"
         "logging: {every_steps: 1}\nruntime: {comm_timeout_s: 60}\n" +
         extra;
}

struct Run {
  std::vector<double> losses, grad_norms;
  double val_loss = 0;
};

Run read_run(const fs::path& metrics) {
  Run run;
  std::istringstream in(read_text(metrics));
  for (std::string line; std::getline(in, line);) {
    const json row = json::parse(line);
    run.losses.push_back(row["loss"].get<double>());
    run.grad_norms.push_back(row["grad_norm"].get<double>());
    if (row.contains("val_loss")) run.val_loss = row["val_loss"];
  }
  return run;
}

Run train(const fs::path& dir, const std::string& name, const std::string& model,
          const std::string& parallel, const std::string& extra = "") {
  write_text(dir / (name + ".yaml"), job_text(name, model, parallel, 4, extra));
  const ProcResult r =
      run_trainctl({"train", (dir / (name + ".yaml")).string()}, dir, std::chrono::seconds(180));
  INFO(name << "\n" << r.out << r.err);
  REQUIRE(r.exit_code == 0);
  Run run = read_run(dir / "runs" / name / "metrics.jsonl");
  REQUIRE(run.losses.size() == 4);
  return run;
}

void check_same(const Run& ref, const Run& got, const std::string& name) {
  for (size_t s = 0; s < ref.losses.size(); ++s) {
    INFO(name << " step " << s + 1);
    CHECK(got.losses[s] == Approx(ref.losses[s]).epsilon(2e-5));
    CHECK(got.grad_norms[s] == Approx(ref.grad_norms[s]).epsilon(1e-4));
  }
  INFO(name << " validation");
  CHECK(got.val_loss == Approx(ref.val_loss).epsilon(2e-5));
}

}  // namespace

TEST_CASE("context-parallel layouts reproduce the single-worker run", "[train][layout][cp]") {
  TempDir dir("layouts_cp");
  for (const auto& [family, model] :
       {std::pair{std::string("gpt"), kGptModel}, std::pair{std::string("llama"), kLlamaModel}}) {
    const Run ref = train(dir.path(), family + "-c1", model, "{dp: 1}");
    for (const auto& [name, parallel] : {std::pair{std::string("c2"), std::string("{cp: 2}")},
                                         {"c4", "{cp: 4}"},
                                         {"d2c2", "{dp: 2, cp: 2}"},
                                         {"t2c2", "{tp: 2, cp: 2}"},
                                         {"p2c2", "{pp: 2, cp: 2, schedule: 1f1b}"},
                                         {"d2c2-zero1", "{dp: 2, cp: 2, zero: 1}"},
                                         {"c2-zero2", "{cp: 2, zero: 2}"},
                                         {"c2-zero3", "{cp: 2, zero: 3}"}}) {
      check_same(ref, train(dir.path(), family + "-" + name, model, parallel), family + "-" + name);
    }
  }
}

// Every pipeline schedule runs each stage's blocks on the local tokens, and recomputation
// repeats the ring forward inside the backward pass: both still give one worker's run. Four
// blocks, so interleaved and zbv have two virtual stages per rank.
TEST_CASE("context parallelism with every schedule and with recomputation reproduces one worker",
          "[train][layout][cp]") {
  TempDir dir("layouts_cp_schedules");
  const std::string gpt4 = "{vocab_size: 64, seq_len: 16, n_layer: 4, n_head: 4, d_model: 32}";
  const std::string llama4 =
      "{type: llama, vocab_size: 64, seq_len: 16, n_layer: 4, n_head: 4, n_kv_head: 2, "
      "d_model: 32, ffn_hidden: 48}";
  for (const auto& [family, model] :
       {std::pair{std::string("gpt"), gpt4}, std::pair{std::string("llama"), llama4}}) {
    const Run ref = train(dir.path(), family + "-c1", model, "{dp: 1}");
    for (const auto& [name, parallel] :
         {std::pair{std::string("p2c2-gpipe"), std::string("{pp: 2, cp: 2, schedule: gpipe}")},
          {"p2c2-interleaved", "{pp: 2, cp: 2, schedule: interleaved, virtual_stages: 2}"},
          {"p2c2-zb1p", "{pp: 2, cp: 2, schedule: zb1p}"},
          {"p2c2-zbv", "{pp: 2, cp: 2, schedule: zbv, virtual_stages: 2}"}}) {
      check_same(ref, train(dir.path(), family + "-" + name, model, parallel), family + "-" + name);
    }
    for (const std::string recompute : {"full", "selective"}) {
      const std::string name = family + "-c2-recompute-" + recompute;
      // job_text's training line is fixed: recomputation goes in through --set.
      write_text(dir.path() / (name + ".yaml"), job_text(name, model, "{cp: 2}", 4));
      const ProcResult r = run_trainctl(
          {"train", name + ".yaml", "--set", "training.activation_checkpointing=" + recompute},
          dir.path(), std::chrono::seconds(180));
      INFO(name << "\n" << r.out << r.err);
      REQUIRE(r.exit_code == 0);
      check_same(ref, read_run(dir.path() / "runs" / name / "metrics.jsonl"), name);
    }
  }
}

// bf16 and fp16 matrix products with context parallelism: the ring's blocks are fp32 and
// the products round the same operands on whichever rank runs them, so cp 2 stays within
// the reach of the format's own rounding of the single worker (integration/rounding_bounds.h).
TEST_CASE("context parallelism under bf16 and fp16 reproduces the single worker",
          "[train][layout][cp][mixed]") {
  TempDir dir("layouts_cp_mixed");
  const Run fp32 = train(dir.path(), "fp32-c1", kLlamaModel, "{dp: 1}");
  for (const std::string precision : {"bf16", "fp16"}) {
    const std::string extra = "precision: {compute: " + precision + "}\n";
    const Run one = train(dir.path(), precision + "-c1", kLlamaModel, "{dp: 1}", extra);
    for (const auto& [name, parallel] :
         {std::pair{std::string("c2"), std::string("{cp: 2}")}, {"d2c2", "{dp: 2, cp: 2}"}}) {
      const Run run = train(dir.path(), precision + "-" + name, kLlamaModel, parallel, extra);
      check_within_rounding(precision + " " + name, precision, run.losses, one.losses, fp32.losses);
    }
  }
}

TEST_CASE("a checkpoint written at one cp resumes at another", "[train][layout][cp]") {
  TempDir dir("cp_resume");
  const std::string ckpt = "checkpoint: {every_steps: 2, async: false}\n";
  // Four steps at cp 2, a checkpoint after step 2; then steps 3-4 again from that
  // checkpoint at cp 4 and at cp 1: the same losses.
  write_text(dir.path() / "straight.yaml", job_text("straight", kGptModel, "{cp: 2}", 4, ckpt));
  REQUIRE(
      run_trainctl({"train", "straight.yaml"}, dir.path(), std::chrono::seconds(120)).exit_code ==
      0);
  const Run straight = read_run(dir.path() / "runs" / "straight" / "metrics.jsonl");
  REQUIRE(straight.losses.size() == 4);
  const fs::path step2 = dir.path() / "runs" / "straight" / "checkpoints" / "step_00000002";
  for (const auto& [name, parallel] :
       {std::pair{std::string("moved-c4"), std::string("{cp: 4}")}, {"moved-c1", "{dp: 1}"}}) {
    write_text(dir.path() / (name + ".yaml"), job_text(name, kGptModel, parallel, 4, ckpt));
    const ProcResult r = run_trainctl({"train", name + ".yaml", "--resume", step2.string()},
                                      dir.path(), std::chrono::seconds(120));
    INFO(name << "\n" << r.out << r.err);
    REQUIRE(r.exit_code == 0);
    const Run moved = read_run(dir.path() / "runs" / name / "metrics.jsonl");
    REQUIRE(moved.losses.size() == 2);
    for (size_t s = 0; s < 2; ++s) {
      INFO(name << " step " << s + 3);
      CHECK(moved.losses[s] == Approx(straight.losses[s + 2]).epsilon(2e-5));
      CHECK(moved.grad_norms[s] == Approx(straight.grad_norms[s + 2]).epsilon(1e-4));
    }
    CHECK(moved.val_loss == Approx(straight.val_loss).epsilon(2e-5));
  }
}

TEST_CASE("validate refuses what context parallelism cannot run", "[config][cp]") {
  TempDir dir("cp_refusals");
  struct Case {
    std::string parallel, model_extra, top, key, says;
  };
  const std::vector<Case> cases = {
      {"{cp: 3}", "", "", "model.seq_len", "divisible by 2 * parallel.cp"},
      {"{cp: 2, zero: 3, grad_comm: bf16}", "", "", "parallel.grad_comm", "fp32 with zero: 3"},
      {"{cp: 2}", "", "device: cuda\n", "parallel.cp", "device: cpu"},
  };
  for (const Case& c : cases) {
    write_text(dir.path() / "job.yaml", c.top + job_text("bad", kGptModel, c.parallel, 2));
    const ProcResult r = run_trainctl({"validate", "job.yaml"}, dir.path());
    INFO(c.parallel << "\n" << r.out << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err,
               Catch::Contains("job.yaml:") && Catch::Contains(c.key) && Catch::Contains(c.says));
  }
}

TEST_CASE("validate shows the cp coordinate in the rank map", "[config][cp]") {
  TempDir dir("cp_rank_map");
  write_text(dir.path() / "job.yaml", job_text("map", kGptModel, "{dp: 2, cp: 2, tp: 2}", 2));
  const ProcResult r = run_trainctl({"validate", "job.yaml"}, dir.path());
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains(" rank  node  local   dp   cp   tp   pp"));
  // Megatron order, tp fastest then cp: rank 2 is (dp 0, cp 1, tp 0), rank 4 is dp 1.
  CHECK_THAT(r.out, Catch::Contains("    2     0      2    0    1    0    0"));
  CHECK_THAT(r.out, Catch::Contains("    4     0      4    1    0    0    0"));
}

TEST_CASE("a sequence the memory plan refuses at cp 1 trains at cp 4 within the limit",
          "[train][memory][cp]") {
  TempDir dir("cp_memory");
  const std::string model = "{vocab_size: 64, seq_len: 16384, n_layer: 1, n_head: 2, d_model: 32}";
  auto job = [&](int cp, double limit_mb) {
    const std::string name = "long-cp" + std::to_string(cp);
    std::string text = "name: " + name + "\nseed: 5\nmodel: " + model +
                       "\ndata: {type: synthetic}\nparallel: {cp: " + std::to_string(cp) +
                       "}\ntraining: {steps: 1, micro_batch_size: 1, global_batch_size: 1, "
                       "eval_every: 0}\nlogging: {every_steps: 1}\nruntime: {comm_timeout_s: "
                       "300";
    if (limit_mb > 0) text += ", memory_limit_mb: " + std::to_string(limit_mb);
    write_text(dir.path() / (name + ".yaml"), text + "}\n");
    return name;
  };
  auto planned_peak = [&](int cp) {
    const ProcResult r = run_trainctl({"plan", job(cp, 0) + ".yaml", "--json"}, dir.path());
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    double most = 0;
    const json planned = json::parse(r.out);
    for (const json& rank : planned["memory_mb"]) {
      most = std::max(most, rank["total"].get<double>());
    }
    return most;
  };
  const double one = planned_peak(1), four = planned_peak(4);
  INFO("planned peak per rank: cp 1 " << one << " MiB, cp 4 " << four << " MiB");
  // The activations dominate at 16k tokens: cp 4 needs well under half of cp 1.
  REQUIRE(four < 0.5 * one);
  const double limit = 1.25 * four;
  const ProcResult refused =
      run_trainctl({"validate", job(1, limit) + ".yaml"}, dir.path(), std::chrono::seconds(60));
  INFO(refused.out << refused.err);
  CHECK(refused.exit_code == 2);
  CHECK_THAT(refused.err,
             Catch::Contains("runtime.memory_limit_mb") && Catch::Contains("parallel.cp: 2"));
  const std::string name = job(4, limit);
  const ProcResult r =
      run_trainctl({"train", name + ".yaml"}, dir.path(), std::chrono::seconds(600));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const json last = json::parse(read_text(dir.path() / "runs" / name / "metrics.jsonl"));
  CHECK(last["mem_peak_mb_max"].get<double>() <= limit);
  CHECK(last["mem_peak_mb_max"].get<double>() == Approx(four).epsilon(0.10));
}
