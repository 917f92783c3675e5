// The memory plan against measurement: `trainctl plan --json`'s per-rank total is within
// 10% of the mem_peak_mb each rank reports in metrics.jsonl (tensor memory, the quantity
// plan/memory_plan.h models), across recomputation modes, ZeRO stages, pipeline schedules,
// tensor parallelism and a long sequence. And a job over runtime.memory_limit_mb is refused
// before launch with the options that would make it fit.
#include <catch2/catch.hpp>
#include <cmath>
#include <nlohmann/json.hpp>

#include "integration/helpers.h"

using namespace trainctl::test;
using nlohmann::json;

namespace {

fs::path write_memory_job(const fs::path& dir, const std::string& name, const std::string& model,
                          const std::string& parallel, const std::string& training) {
  const fs::path job = dir / (name + ".yaml");
  write_text(job, "name: " + name + "\nseed: 3\nmodel: " + model +
                      "\ndata: {type: synthetic}\nparallel: " + parallel +
                      "\ntraining: {steps: 2, " + training +
                      "}\n"
                      "logging: {every_steps: 1}\nruntime: {comm_timeout_s: 60}\n");
  return job;
}

const std::string kModel = "{vocab_size: 128, seq_len: 64, n_layer: 4, n_head: 4, d_model: 64}";
const std::string kLlama =
    "{type: llama, vocab_size: 128, seq_len: 64, n_layer: 4, n_head: 4, n_kv_head: 2, "
    "d_model: 64, multiple_of: 32}";

}  // namespace

TEST_CASE("the memory plan matches each rank's measured tensor memory within 10%",
          "[train][memory]") {
  TempDir dir("memory_plan");
  struct Case {
    std::string name, model, parallel, training;
  };
  const std::string batch = "micro_batch_size: 2, global_batch_size: 8";
  const std::vector<Case> cases = {
      {"none", kModel, "{dp: 1}", batch},
      {"selective", kModel, "{dp: 1}", batch + ", activation_checkpointing: selective"},
      {"full", kModel, "{dp: 1}", batch + ", activation_checkpointing: full"},
      {"dp2-zero0", kModel, "{dp: 2}", batch},
      {"dp2-zero1", kModel, "{dp: 2, zero: 1}", batch},
      {"dp2-zero2-full", kModel, "{dp: 2, zero: 2}", batch + ", activation_checkpointing: full"},
      {"dp2-zero3", kModel, "{dp: 2, zero: 3}", batch},
      {"dp2-tp2-zero3-selective", kModel, "{dp: 2, tp: 2, zero: 3}",
       batch + ", activation_checkpointing: selective"},
      {"dp2-pp2-zero3-1f1b", kModel, "{dp: 2, pp: 2, schedule: 1f1b, zero: 3}", batch},
      {"pp2-gpipe", kModel, "{pp: 2, schedule: gpipe}", batch},
      {"pp2-1f1b-selective", kModel, "{pp: 2, schedule: 1f1b}",
       batch + ", activation_checkpointing: selective"},
      {"tp2-pp2-interleaved", kModel, "{tp: 2, pp: 2, schedule: interleaved, virtual_stages: 2}",
       batch},
      // What each B keeps for its W (model/deferred_weight_grads.h) counts.
      {"pp2-zb1p-full", kModel, "{pp: 2, schedule: zb1p}",
       batch + ", activation_checkpointing: full"},
      {"llama-dp2-pp2-zb1p-zero2", kLlama, "{dp: 2, pp: 2, schedule: zb1p, zero: 2}", batch},
      // zbv: rank 0 holds the embedding, the head and two chunks; the V's turn its staging.
      {"pp2-zbv", kModel, "{pp: 2, schedule: zbv, virtual_stages: 2}", batch},
      {"llama-dp2-pp2-zbv-zero1-selective", kLlama,
       "{dp: 2, pp: 2, schedule: zbv, virtual_stages: 2, zero: 1}",
       batch + ", activation_checkpointing: selective"},
      {"long-seq", "{vocab_size: 128, seq_len: 512, n_layer: 2, n_head: 4, d_model: 64}", "{dp: 1}",
       "micro_batch_size: 2, global_batch_size: 2"},
      {"llama", kLlama, "{dp: 1}", batch},
      {"llama-tp2-pp2-selective", kLlama, "{tp: 2, pp: 2}",
       batch + ", activation_checkpointing: selective"},
      // The mixed-precision layout (parallel/mixed_params.h): 16-bit weights, fp32 master
      // weights (sharded under ZeRO), widening buffers.
      {"bf16", kModel + "\nprecision: {compute: bf16}", "{dp: 1}", batch},
      {"bf16-dp2-zero1", kModel + "\nprecision: {compute: bf16}", "{dp: 2, zero: 1}", batch},
      {"fp16-dp2-zero2-full", kModel + "\nprecision: {compute: fp16}", "{dp: 2, zero: 2}",
       batch + ", activation_checkpointing: full"},
      {"llama-bf16-dp2-pp2-zbv-zero1", kLlama + "\nprecision: {compute: bf16}",
       "{dp: 2, pp: 2, schedule: zbv, virtual_stages: 2, zero: 1}", batch},
      {"llama-bf16-tp2-pp2-interleaved", kLlama + "\nprecision: {compute: bf16}",
       "{tp: 2, pp: 2, schedule: interleaved, virtual_stages: 2}", batch}};
  for (const Case& c : cases) {
    const fs::path job = write_memory_job(dir.path(), c.name, c.model, c.parallel, c.training);
    const ProcResult plan = run_trainctl({"plan", job.string(), "--json"}, dir.path());
    INFO(c.name << "\n" << plan.out << plan.err);
    REQUIRE(plan.exit_code == 0);
    const json planned = json::parse(plan.out);
    const ProcResult train =
        run_trainctl({"train", job.string()}, dir.path(), std::chrono::seconds(120));
    INFO(train.out << train.err);
    REQUIRE(train.exit_code == 0);
    std::istringstream in(read_text(dir.path() / "runs" / c.name / "metrics.jsonl"));
    json last;
    for (std::string line; std::getline(in, line);) last = json::parse(line);
    REQUIRE(last.contains("mem_peak_mb_ranks"));
    const auto measured = last["mem_peak_mb_ranks"].get<std::vector<double>>();
    REQUIRE(measured.size() == planned["memory_mb"].size());
    double most = 0;
    for (size_t r = 0; r < measured.size(); ++r) {
      INFO("rank " << r);
      const json& est = planned["memory_mb"][r];
      CHECK(est["rank"].get<size_t>() == r);
      CHECK(est["total"].get<double>() == Approx(measured[r]).epsilon(0.10));
      // The parts add up to the total.
      const double parts = est["parameters"].get<double>() + est["gradients"].get<double>() +
                           est["master_weights"].get<double>() + est["optimizer"].get<double>() +
                           est["activations"].get<double>() + est["communication"].get<double>() +
                           est["workspace"].get<double>();
      CHECK(parts == Approx(est["total"].get<double>()));
      most = std::max(most, measured[r]);
    }
    CHECK(last["mem_peak_mb_max"].get<double>() == Approx(most));
    CHECK(last["mem_peak_mb"].get<double>() == Approx(measured[0]));
    CHECK(last["mem_rss_peak_mb"].get<double>() > last["mem_peak_mb"].get<double>());
  }
}

TEST_CASE("a pipeline stage's tensor memory does not grow with the step's micro-batches",
          "[train][memory][pipeline]") {
  // Outgoing activations and gradients wait in staging pools of a fixed size
  // (parallel/boundary_staging.h), not one buffer per message of the step: 4 and 32
  // micro-batches measure the same peak on every rank, to less than one boundary tensor
  // (1 x 512 x 64 floats = 0.125 MiB). One buffer per gradient sent used to add 28 of them.
  TempDir dir("memory_micro_batches");
  const std::string model = "{vocab_size: 128, seq_len: 512, n_layer: 4, n_head: 4, d_model: 64}";
  for (const std::string parallel :
       {"{pp: 2, schedule: 1f1b}", "{pp: 2, schedule: interleaved, virtual_stages: 2}"}) {
    std::vector<std::vector<double>> peaks;
    for (const int batch : {4, 32}) {
      const std::string name = "mb" + std::to_string(batch) +
                               (parallel.find("interleaved") != std::string::npos ? "-i" : "");
      const fs::path job =
          write_memory_job(dir.path(), name, model, parallel,
                           "micro_batch_size: 1, global_batch_size: " + std::to_string(batch));
      const ProcResult train =
          run_trainctl({"train", job.string()}, dir.path(), std::chrono::seconds(120));
      INFO(name << "\n" << train.out << train.err);
      REQUIRE(train.exit_code == 0);
      std::istringstream in(read_text(dir.path() / "runs" / name / "metrics.jsonl"));
      json last;
      for (std::string line; std::getline(in, line);) last = json::parse(line);
      peaks.push_back(last["mem_peak_mb_ranks"].get<std::vector<double>>());
    }
    INFO(parallel);
    REQUIRE(peaks[0].size() == 2);
    REQUIRE(peaks[1].size() == 2);
    for (size_t r = 0; r < 2; ++r) {
      INFO("rank " << r << ": " << peaks[0][r] << " MiB at 4 micro-batches, " << peaks[1][r]
                   << " at 32");
      CHECK(std::abs(peaks[1][r] - peaks[0][r]) < 0.125);
    }
  }
}

TEST_CASE("a job over runtime.memory_limit_mb is refused before launch, with what would fit",
          "[train][memory]") {
  TempDir dir("memory_limit");
  const fs::path job = write_memory_job(
      dir.path(), "too-big", "{vocab_size: 128, seq_len: 256, n_layer: 4, n_head: 4, d_model: 64}",
      "{dp: 2}", "micro_batch_size: 4, global_batch_size: 8");
  // The estimate is ~24 MiB per rank, most of it activations: full recomputation (~13) fits.
  write_text(job, read_text(job) + "runtime:\n  memory_limit_mb: 14\n");
  // runtime appears twice now: rewrite the spec with one runtime section.
  std::string text = read_text(job);
  text.replace(text.find("runtime: {comm_timeout_s: 60}\n"), 30, "");
  write_text(job, text);
  for (const char* command : {"validate", "train"}) {
    const ProcResult r = run_trainctl({command, job.string()}, dir.path());
    INFO(command << "\n" << r.out << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err,
               Catch::Contains("per rank but the limit is 14.0 MiB (runtime.memory_limit_mb)"));
    CHECK_THAT(r.err, Catch::Contains("activations"));
    CHECK_THAT(r.err, Catch::Contains("* training.activation_checkpointing: full ->"));
    CHECK_THAT(r.err, Catch::Contains("* training.micro_batch_size: 2"));
    CHECK_THAT(r.err, Catch::Contains("parallel.pp: 2 (4 workers) ->"));
    CHECK_THAT(r.err, Catch::Contains("parallel.zero: 3 ->"));
  }
  CHECK_FALSE(fs::exists(dir.path() / "runs" / "too-big"));
  // The suggested change fits: validate accepts it and prints the plan.
  const ProcResult ok = run_trainctl(
      {"validate", job.string(), "--set", "training.activation_checkpointing=full"}, dir.path());
  INFO(ok.out << ok.err);
  CHECK(ok.exit_code == 0);
  CHECK_THAT(ok.out, Catch::Contains("memory per rank (MiB"));
  CHECK_THAT(ok.out, Catch::Contains("limit 14.0 MiB per rank (runtime.memory_limit_mb)"));
}
