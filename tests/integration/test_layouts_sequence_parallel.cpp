// Sequence parallelism (parallel.sequence_parallel) joins the layout-equivalence matrix
// (DESIGN.md, "How correctness is proven"): with dp, tp and pp, every schedule, ZeRO 1/2/3,
// recomputation, both families, MoE, context parallelism and reduced precision it
// reproduces the single worker
// (and plain tensor parallelism) within float tolerance; recomputation stays bitwise; it
// keeps less memory than tp alone, and the memory plan still matches what each rank
// measures.
#include <catch2/catch.hpp>
#include <map>
#include <nlohmann/json.hpp>

#include "integration/helpers.h"
#include "integration/rounding_bounds.h"

using namespace trainctl::test;
using nlohmann::json;

namespace {

struct Run {
  std::vector<double> losses, grad_norms;
  double val_loss = 0;
  std::vector<double> mem_ranks;
};

// The models of test_layouts_3d.cpp and test_layouts_moe.cpp: 4 blocks, seq_len 16.
const std::string kGpt = "{vocab_size: 64, seq_len: 16, n_layer: 4, n_head: 4, d_model: 32}";
const std::string kLlama =
    "{type: llama, vocab_size: 64, seq_len: 16, n_layer: 4, n_head: 4, n_kv_head: 2, "
    "d_model: 32, ffn_hidden: 48}";
const std::string kMoe =
    "{vocab_size: 64, seq_len: 16, n_layer: 4, n_head: 4, d_model: 32, moe: {num_experts: 4, "
    "top_k: 2, expert_ffn_hidden: 24, balance: aux_loss, aux_loss_coef: 0.05, layers: "
    "every_2}}";

Run train(const fs::path& dir, const std::string& name, const std::string& parallel,
          const std::string& model = kGpt, const std::string& precision = "fp32",
          const std::string& training = "") {
  const fs::path job = dir / (name + ".yaml");
  write_text(job, "name: " + name + "\nseed: 11\nmodel: " + model +
                      "\ndata: {type: synthetic}\nparallel: " + parallel +
                      "\nprecision: {compute: " + precision +
                      "}\ntraining: {steps: 6, micro_batch_size: 2, global_batch_size: 8, "
                      "eval_every: 6, eval_batches: 2" +
                      training +
                      "}\n"
                      "optimizer: {lr: 1.0e-2, warmup_steps: 1, min_lr: 1.0e-3}\n"
                      "logging: {every_steps: 1}\nruntime: {comm_timeout_s: 60}\n");
  const ProcResult r = run_trainctl({"train", job.string()}, dir, std::chrono::seconds(180));
  INFO(name << "\n" << r.out << r.err);
  REQUIRE(r.exit_code == 0);
  Run run;
  std::istringstream in(read_text(dir / "runs" / name / "metrics.jsonl"));
  json last;
  for (std::string line; std::getline(in, line);) {
    last = json::parse(line);
    run.losses.push_back(last["loss"].get<double>());
    run.grad_norms.push_back(last["grad_norm"].get<double>());
    if (last.contains("val_loss")) run.val_loss = last["val_loss"];
  }
  REQUIRE(run.losses.size() == 6);
  run.mem_ranks = last["mem_peak_mb_ranks"].get<std::vector<double>>();
  return run;
}

void check_same_run(const std::string& name, const Run& run, const Run& ref) {
  for (size_t s = 0; s < ref.losses.size(); ++s) {
    INFO(name << " step " << s + 1);
    CHECK(run.losses[s] == Approx(ref.losses[s]).epsilon(2e-5));
    CHECK(run.grad_norms[s] == Approx(ref.grad_norms[s]).epsilon(1e-4));
  }
  INFO(name << " validation");
  CHECK(run.val_loss == Approx(ref.val_loss).epsilon(2e-5));
}

}  // namespace

TEST_CASE("sequence parallelism reproduces the single worker on every layout",
          "[train][layout][sequence_parallel]") {
  TempDir dir("layouts_sp");
  struct Case {
    std::string name, parallel, model;
  };
  const std::string sp = "sequence_parallel: true";
  const std::vector<Case> cases = {
      {"d1t2p1-sp", "{tp: 2, " + sp + "}", kGpt},
      {"d2t2p1-sp", "{dp: 2, tp: 2, " + sp + "}", kGpt},
      {"d2t2p1-sp-zero1", "{dp: 2, tp: 2, zero: 1, " + sp + "}", kGpt},
      {"d2t2p1-sp-zero2", "{dp: 2, tp: 2, zero: 2, " + sp + "}", kGpt},
      {"d2t2p1-sp-zero3", "{dp: 2, tp: 2, zero: 3, " + sp + "}", kGpt},
      {"d1t2p2-sp-gpipe", "{tp: 2, pp: 2, schedule: gpipe, " + sp + "}", kGpt},
      {"d2t2p2-sp-1f1b", "{dp: 2, tp: 2, pp: 2, schedule: 1f1b, " + sp + "}", kGpt},
      {"d2t2p2-sp-interleaved",
       "{dp: 2, tp: 2, pp: 2, schedule: interleaved, virtual_stages: 2, " + sp + "}", kGpt},
      {"d1t4p1-sp", "{tp: 4, " + sp + "}", kGpt},
      {"llama-d1t2p1-sp", "{tp: 2, " + sp + "}", kLlama},
      {"llama-d2t2p2-sp-zero1", "{dp: 2, tp: 2, pp: 2, zero: 1, " + sp + "}", kLlama},
      {"moe-d1t2p2-sp", "{tp: 2, pp: 2, " + sp + "}", kMoe},
      // With context parallelism each TP group splits its seq_len / cp tokens.
      {"d1t2c2-sp", "{tp: 2, cp: 2, " + sp + "}", kGpt},
      {"llama-d1t2p2c2-sp-1f1b", "{tp: 2, pp: 2, cp: 2, schedule: 1f1b, " + sp + "}", kLlama},
      {"d2t2c2-sp-zero1", "{dp: 2, tp: 2, cp: 2, zero: 1, " + sp + "}", kGpt}};
  const Run gpt = train(dir.path(), "gpt-d1t1p1", "{dp: 1}");
  const Run gpt_tp = train(dir.path(), "gpt-d1t2p1", "{tp: 2}");
  const Run llama = train(dir.path(), "llama-d1t1p1", "{dp: 1}", kLlama);
  const Run moe = train(dir.path(), "moe-d1t1p1", "{dp: 1}", kMoe);
  for (const Case& c : cases) {
    const Run run = train(dir.path(), c.name, c.parallel, c.model);
    const Run& ref = c.model == kGpt ? gpt : c.model == kLlama ? llama : moe;
    check_same_run(c.name, run, ref);
  }
  // The same losses as tp without it, and less memory on every rank.
  const Run sp_tp = train(dir.path(), "gpt-d1t2p1-sp", "{tp: 2, " + sp + "}");
  check_same_run("sp against tp", sp_tp, gpt_tp);
  REQUIRE(sp_tp.mem_ranks.size() == gpt_tp.mem_ranks.size());
  for (size_t r = 0; r < sp_tp.mem_ranks.size(); ++r)
    CHECK(sp_tp.mem_ranks[r] < gpt_tp.mem_ranks[r]);
}

TEST_CASE("sequence parallelism: recomputation bitwise, reduced precision within rounding",
          "[train][layout][sequence_parallel][recompute][mixed]") {
  TempDir dir("layouts_sp_modes");
  const std::string par = "{dp: 2, tp: 2, pp: 2, zero: 1, sequence_parallel: true}";
  const Run none = train(dir.path(), "sp", par);
  for (const std::string mode : {"selective", "full"}) {
    const Run run =
        train(dir.path(), "sp-" + mode, par, kGpt, "fp32", ", activation_checkpointing: " + mode);
    INFO(mode);
    CHECK(run.losses == none.losses);
    CHECK(run.grad_norms == none.grad_norms);
    CHECK(run.val_loss == none.val_loss);
  }
  const Run fp32 = train(dir.path(), "fp32", "{dp: 1}");
  for (const std::string precision : {"bf16", "fp16"}) {
    const Run one = train(dir.path(), precision + "-one", "{dp: 1}", kGpt, precision);
    const Run run = train(dir.path(), precision + "-sp", "{dp: 2, tp: 2, sequence_parallel: true}",
                          kGpt, precision);
    check_within_rounding(precision + " sequence parallel", precision, run.losses, one.losses,
                          fp32.losses);
  }
}

TEST_CASE("the memory plan models sequence parallelism as each rank measures it",
          "[train][memory][sequence_parallel]") {
  TempDir dir("memory_plan_sp");
  const std::string model = "{vocab_size: 128, seq_len: 256, n_layer: 2, n_head: 4, d_model: 64}";
  std::map<std::string, double> activations;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"false", "{tp: 2, sequence_parallel: false}"},
      {"true", "{tp: 2, sequence_parallel: true}"},
      {"pp2-true", "{tp: 2, pp: 2, schedule: gpipe, sequence_parallel: true}"},
      {"cp2-true", "{tp: 2, cp: 2, sequence_parallel: true}"}};
  for (const auto& [sp, parallel] : cases) {
    const std::string name = "tp2-sp-" + sp;
    const fs::path job = dir.path() / (name + ".yaml");
    write_text(job, "name: " + name + "\nseed: 3\nmodel: " + model +
                        "\ndata: {type: synthetic}\nparallel: " + parallel +
                        "\ntraining: {steps: 2, micro_batch_size: 2, global_batch_size: 4}\n"
                        "logging: {every_steps: 1}\nruntime: {comm_timeout_s: 60}\n");
    const ProcResult plan = run_trainctl({"plan", job.string(), "--json"}, dir.path());
    INFO(name << "\n" << plan.out << plan.err);
    REQUIRE(plan.exit_code == 0);
    const json planned = json::parse(plan.out);
    const ProcResult r =
        run_trainctl({"train", job.string()}, dir.path(), std::chrono::seconds(120));
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    std::istringstream in(read_text(dir.path() / "runs" / name / "metrics.jsonl"));
    json last;
    for (std::string line; std::getline(in, line);) last = json::parse(line);
    const auto measured = last["mem_peak_mb_ranks"].get<std::vector<double>>();
    REQUIRE(measured.size() == planned["memory_mb"].size());
    for (size_t k = 0; k < measured.size(); ++k) {
      INFO("rank " << k);
      CHECK(planned["memory_mb"][k]["total"].get<double>() == Approx(measured[k]).epsilon(0.10));
    }
    activations[sp] = planned["memory_mb"][0]["activations"].get<double>();
  }
  // Without recomputation a block keeps 2 [N,C] residual tensors and 2 gathered norm
  // outputs (plus the TP-split ones): sequence parallelism halves the first two at tp 2.
  CHECK(activations["true"] < activations["false"]);
}
