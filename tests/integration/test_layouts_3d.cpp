// The layout-equivalence matrix (DESIGN.md, "How correctness is proven"): the same job —
// seed, data, global batch — trained under every combination of dp, tp and pp in {1, 2},
// with each pipeline schedule and with ZeRO, gives the same per-step losses and the same
// exported model as one worker.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "checkpoint/safetensors.h"
#include "integration/helpers.h"
#include "integration/rounding_bounds.h"

using namespace trainctl::test;
using nlohmann::json;

namespace {

struct Run {
  std::vector<double> losses, grad_norms;
  double val_loss = 0;
  std::vector<json> rows;
};

// 4 blocks, 4 heads, vocab 64: every axis splits evenly at 2 (and interleaved pp 2 × 2
// virtual stages gets one block per chunk). Global batch 8 = micro-batch 2 × accum × dp.
const std::string kGptModel = "{vocab_size: 64, seq_len: 16, n_layer: 4, n_head: 4, d_model: 32}";
// Llama of the same size: 2 k/v heads (grouped-query attention at tp 1, one k/v head per
// rank at tp 2), SwiGLU width 48, untied head.
const std::string kLlamaModel =
    "{type: llama, vocab_size: 64, seq_len: 16, n_layer: 4, n_head: 4, n_kv_head: 2, "
    "d_model: 32, ffn_hidden: 48}";

Run train_layout(const fs::path& dir, const std::string& name, const std::string& parallel,
                 const std::string& precision = "fp32", const std::string& training = "",
                 const std::string& model = kGptModel) {
  const fs::path job = dir / (name + ".yaml");
  write_text(job, "name: " + name +
                      "\nseed: 11\n"
                      "model: " +
                      model +
                      "\n"
                      "data: {type: synthetic}\n"
                      "parallel: " +
                      parallel + "\nprecision: {compute: " + precision +
                      "}\n"
                      "training: {steps: 6, micro_batch_size: 2, global_batch_size: 8, "
                      "eval_every: 6, eval_batches: 2" +
                      training +
                      "}\n"
                      "optimizer: {lr: 1.0e-2, warmup_steps: 1, min_lr: 1.0e-3}\n"
                      "logging: {every_steps: 1}\n"
                      "runtime: {comm_timeout_s: 60}\n");
  const ProcResult r = run_trainctl({"train", job.string()}, dir, std::chrono::seconds(120));
  INFO(name << "\n" << r.out << r.err);
  REQUIRE(r.exit_code == 0);
  Run run;
  std::istringstream in(read_text(dir / "runs" / name / "metrics.jsonl"));
  for (std::string line; std::getline(in, line);) {
    run.rows.push_back(json::parse(line));
    run.losses.push_back(run.rows.back()["loss"].get<double>());
    run.grad_norms.push_back(run.rows.back()["grad_norm"].get<double>());
    if (run.rows.back().contains("val_loss")) run.val_loss = run.rows.back()["val_loss"];
  }
  REQUIRE(run.losses.size() == 6);
  // Run again on one CPU kernel path (tests/cpu_isa/with_isa.sh): prove the workers ran it.
  if (const char* isa = std::getenv("TRAINCTL_CPU_ISA"); isa != nullptr && *isa != '\0') {
    CHECK_THAT(read_text(dir / "runs" / name / "logs" / "rank0.log"),
               Catch::Contains(std::string("cpu kernels: ") + isa));
  }
  return run;
}

std::vector<float> floats_of(const trainctl::checkpoint::NamedTensor& t) {
  const float* p = t.tensor.data<float>();
  return std::vector<float>(p, p + t.tensor.numel());
}

}  // namespace

TEST_CASE("every dp x tp x pp layout reproduces the single-worker run", "[train][layout]") {
  TempDir dir("layouts3d");
  struct Case {
    std::string name, parallel;
  };
  std::vector<Case> cases = {{"d1t1p1", "{dp: 1, tp: 1, pp: 1}"},
                             {"d2t1p1", "{dp: 2, tp: 1, pp: 1}"},
                             {"d1t2p1", "{dp: 1, tp: 2, pp: 1}"},
                             {"d2t2p1", "{dp: 2, tp: 2, pp: 1}"},
                             {"d2t2p1-zero2", "{dp: 2, tp: 2, pp: 1, zero: 2}"}};
  for (const std::string schedule : {"gpipe", "1f1b", "zb1p"}) {
    cases.push_back({"d1t1p2-" + schedule, "{dp: 1, tp: 1, pp: 2, schedule: " + schedule + "}"});
    cases.push_back({"d2t1p2-" + schedule, "{dp: 2, tp: 1, pp: 2, schedule: " + schedule + "}"});
    cases.push_back({"d1t2p2-" + schedule, "{dp: 1, tp: 2, pp: 2, schedule: " + schedule + "}"});
    cases.push_back({"d2t2p2-" + schedule, "{dp: 2, tp: 2, pp: 2, schedule: " + schedule + "}"});
  }
  // Interleaved 1F1B: 2 chunks of one block per stage (micro-batches per DP rank: 4 at
  // dp 1, 2 at dp 2; both multiples of pp as the schedule needs).
  for (const std::string layout : {"d1t1p2", "d2t1p2", "d1t2p2", "d2t2p2"}) {
    const std::string dp(1, layout[1]), tp(1, layout[3]);
    cases.push_back(
        {layout + "-interleaved",
         "{dp: " + dp + ", tp: " + tp + ", pp: 2, schedule: interleaved, " + "virtual_stages: 2}"});
  }
  cases.push_back({"d2t1p2-1f1b-zero1", "{dp: 2, tp: 1, pp: 2, zero: 1}"});
  cases.push_back({"d2t2p2-1f1b-zero2", "{dp: 2, tp: 2, pp: 2, zero: 2}"});
  cases.push_back({"d2t1p2-zb1p-zero1", "{dp: 2, tp: 1, pp: 2, schedule: zb1p, zero: 1}"});
  cases.push_back({"d2t2p2-zb1p-zero2", "{dp: 2, tp: 2, pp: 2, schedule: zb1p, zero: 2}"});
  // ZeRO-3: parameters sharded over dp, gathered block by block.
  cases.push_back({"d2t1p1-zero3", "{dp: 2, tp: 1, pp: 1, zero: 3}"});
  cases.push_back({"d4t1p1-zero3", "{dp: 4, tp: 1, pp: 1, zero: 3}"});
  cases.push_back({"d2t2p1-zero3", "{dp: 2, tp: 2, pp: 1, zero: 3}"});
  cases.push_back({"d2t1p2-gpipe-zero3", "{dp: 2, tp: 1, pp: 2, schedule: gpipe, zero: 3}"});
  cases.push_back({"d2t2p2-1f1b-zero3", "{dp: 2, tp: 2, pp: 2, schedule: 1f1b, zero: 3}"});

  std::vector<Run> runs;
  for (const Case& c : cases) runs.push_back(train_layout(dir.path(), c.name, c.parallel));
  // Tolerance: relative 2e-5 per step (as for data parallelism). Layouts differ only in
  // the order of fp32 sums (TP partial products, DP reductions, the tied embedding's two
  // halves): ~1e-7 relative per step, amplified by 6 AdamW steps to ~1e-6.
  const Run& ref = runs[0];
  for (size_t k = 1; k < runs.size(); ++k) {
    for (size_t s = 0; s < ref.losses.size(); ++s) {
      INFO(cases[k].name << " step " << s + 1);
      CHECK(runs[k].losses[s] == Approx(ref.losses[s]).epsilon(2e-5));
      CHECK(runs[k].grad_norms[s] == Approx(ref.grad_norms[s]).epsilon(1e-4));
    }
    INFO(cases[k].name << " validation");
    CHECK(runs[k].val_loss == Approx(ref.val_loss).epsilon(2e-5));
  }
  // The exported model of the 3D run is the single worker's, tensor for tensor.
  const auto whole =
      trainctl::checkpoint::read_safetensors(dir.path() / "runs" / "d1t1p1" / "model.safetensors");
  const auto three_d = trainctl::checkpoint::read_safetensors(dir.path() / "runs" / "d2t2p2-1f1b" /
                                                              "model.safetensors");
  REQUIRE(three_d.size() == whole.size());
  for (size_t i = 0; i < whole.size(); ++i) {
    const auto& w = whole[i];
    const auto& t = three_d[i];
    INFO(w.name);
    REQUIRE(t.name == w.name);
    REQUIRE(t.tensor.shape() == w.tensor.shape());
    const auto a = floats_of(w), b = floats_of(t);
    double worst = 0;
    for (size_t j = 0; j < a.size(); ++j) worst = std::max(worst, double(std::fabs(a[j] - b[j])));
    CHECK(worst < 1e-4);
  }
  // Pipeline runs report each stage's idle time and the measured bubble.
  for (size_t k = 0; k < runs.size(); ++k) {
    const json& row = runs[k].rows.back();
    INFO(cases[k].name);
    CHECK(row.contains("pipeline_idle_ms") ==
          (cases[k].parallel.find("pp: 2") != std::string::npos));
  }
}

TEST_CASE("bf16 matrix products: every layout reproduces the single bf16 worker",
          "[train][layout][mixed]") {
  TempDir dir("layouts_bf16");
  const Run fp32 = train_layout(dir.path(), "fp32", "{dp: 1, tp: 1, pp: 1}", "fp32");
  const Run one = train_layout(dir.path(), "d1t1p1", "{dp: 1, tp: 1, pp: 1}", "bf16");
  // bf16 rounding shows in the losses (measured ~6e-4 relative by step 4 on this model),
  // an order of magnitude above the layout tolerance below, so a layout that silently
  // computed in fp32 would fail; and it stays a small perturbation of the fp32 run.
  double worst_vs_fp32 = 0;
  for (size_t s = 0; s < one.losses.size(); ++s) {
    worst_vs_fp32 = std::max(worst_vs_fp32, std::fabs(one.losses[s] / fp32.losses[s] - 1));
  }
  CHECK(worst_vs_fp32 > 2e-4);
  CHECK(worst_vs_fp32 < 1e-2);
  // Layouts round the same operands and reorder fp32 sums only: each stays within the
  // reach of bf16 rounding itself, and nearer the bf16 worker than fp32
  // (integration/rounding_bounds.h derives the bound).
  for (const auto& [name, parallel] : std::vector<std::pair<std::string, std::string>>{
           {"d2t2p1", "{dp: 2, tp: 2, pp: 1}"},
           {"d1t2p2", "{dp: 1, tp: 2, pp: 2, schedule: 1f1b}"},
           {"d2t2p2-zero1", "{dp: 2, tp: 2, pp: 2, zero: 1}"},
           {"d2t2p1-zero2", "{dp: 2, tp: 2, pp: 1, zero: 2}"},
           {"d2t1p2-zb1p-zero2", "{dp: 2, tp: 1, pp: 2, schedule: zb1p, zero: 2}"}}) {
    const Run run = train_layout(dir.path(), name, parallel, "bf16");
    check_within_rounding(name, "bf16", run.losses, one.losses, fp32.losses);
  }
}

TEST_CASE(
    "activation recomputation: bitwise the same run on every layout, schedule, ZeRO stage "
    "and precision",
    "[train][layout][recompute]") {
  TempDir dir("layouts_recompute");
  struct Case {
    std::string name, parallel, precision;
  };
  const std::vector<Case> cases = {
      {"d1t1p1-fp16", "{dp: 1, tp: 1, pp: 1}", "fp16"},
      {"d2t2p1-zero2", "{dp: 2, tp: 2, pp: 1, zero: 2}", "fp32"},
      {"d1t2p2-gpipe-bf16", "{dp: 1, tp: 2, pp: 2, schedule: gpipe}", "bf16"},
      {"d2t1p2-1f1b-zero1", "{dp: 2, tp: 1, pp: 2, schedule: 1f1b, zero: 1}", "fp32"},
      {"d2t2p2-zb1p-zero2", "{dp: 2, tp: 2, pp: 2, schedule: zb1p, zero: 2}", "fp32"},
      {"d2t2p2-interleaved", "{dp: 2, tp: 2, pp: 2, schedule: interleaved, virtual_stages: 2}",
       "fp32"},
      {"d2t1p2-interleaved-zero3",
       "{dp: 2, tp: 1, pp: 2, schedule: interleaved, virtual_stages: 2, zero: 3}", "fp32"},
      {"d2t2p1-zero2-fp16", "{dp: 2, tp: 2, pp: 1, zero: 2}", "fp16"}};
  for (const Case& c : cases) {
    const Run none = train_layout(dir.path(), c.name, c.parallel, c.precision);
    for (const std::string mode : {"selective", "full"}) {
      const Run run = train_layout(dir.path(), c.name + "-" + mode, c.parallel, c.precision,
                                   ", activation_checkpointing: " + mode);
      INFO(c.name << " " << mode);
      // The same kernels on the same inputs: equal to the bit, not within a tolerance.
      CHECK(run.losses == none.losses);
      CHECK(run.grad_norms == none.grad_norms);
      CHECK(run.val_loss == none.val_loss);
      // And it keeps less: every rank's tensor memory falls.
      const auto kept = run.rows.back()["mem_peak_mb_ranks"].get<std::vector<double>>();
      const auto all = none.rows.back()["mem_peak_mb_ranks"].get<std::vector<double>>();
      REQUIRE(kept.size() == all.size());
      for (size_t r = 0; r < kept.size(); ++r) CHECK(kept[r] < all[r]);
    }
  }
}

TEST_CASE(
    "llama: every dp x tp x pp layout, schedule, ZeRO stage and recomputation reproduces "
    "the single-worker run",
    "[train][layout][llama]") {
  TempDir dir("layouts_llama");
  struct Case {
    std::string name, parallel, training;
  };
  const std::vector<Case> cases = {
      {"d1t1p1", "{dp: 1, tp: 1, pp: 1}", ""},
      {"d2t1p1", "{dp: 2, tp: 1, pp: 1}", ""},
      {"d1t2p1", "{dp: 1, tp: 2, pp: 1}", ""},
      {"d2t2p1-zero2", "{dp: 2, tp: 2, pp: 1, zero: 2}", ""},
      {"d2t2p1-zero3", "{dp: 2, tp: 2, pp: 1, zero: 3}", ""},
      {"d2t1p2-zero3-selective", "{dp: 2, tp: 1, pp: 2, zero: 3}",
       ", activation_checkpointing: selective"},
      {"d1t1p2-gpipe", "{dp: 1, tp: 1, pp: 2, schedule: gpipe}", ""},
      {"d2t1p2-1f1b-zero1", "{dp: 2, tp: 1, pp: 2, zero: 1}", ""},
      {"d1t2p2-1f1b", "{dp: 1, tp: 2, pp: 2}", ""},
      {"d2t2p2-interleaved", "{dp: 2, tp: 2, pp: 2, schedule: interleaved, virtual_stages: 2}", ""},
      {"d1t2p2-selective", "{dp: 1, tp: 2, pp: 2}", ", activation_checkpointing: selective"},
      {"d2t2p2-zb1p-zero1", "{dp: 2, tp: 2, pp: 2, schedule: zb1p, zero: 1}", ""},
      {"d2t1p2-zb1p-zero2-full", "{dp: 2, tp: 1, pp: 2, schedule: zb1p, zero: 2}",
       ", activation_checkpointing: full"},
      {"d2t1p2-full", "{dp: 2, tp: 1, pp: 2}", ", activation_checkpointing: full"}};
  std::vector<Run> runs;
  for (const Case& c : cases) {
    runs.push_back(train_layout(dir.path(), c.name, c.parallel, "fp32", c.training, kLlamaModel));
  }
  // The same tolerance as GPT's matrix above.
  const Run& ref = runs[0];
  for (size_t k = 1; k < runs.size(); ++k) {
    for (size_t s = 0; s < ref.losses.size(); ++s) {
      INFO(cases[k].name << " step " << s + 1);
      CHECK(runs[k].losses[s] == Approx(ref.losses[s]).epsilon(2e-5));
      CHECK(runs[k].grad_norms[s] == Approx(ref.grad_norms[s]).epsilon(1e-4));
    }
    INFO(cases[k].name << " validation");
    CHECK(runs[k].val_loss == Approx(ref.val_loss).epsilon(2e-5));
  }
  // It learns, and the exported 3D model is the single worker's, under Hugging Face's names.
  CHECK(ref.losses.back() < ref.losses.front());
  const auto whole =
      trainctl::checkpoint::read_safetensors(dir.path() / "runs" / "d1t1p1" / "model.safetensors");
  const auto three_d = trainctl::checkpoint::read_safetensors(
      dir.path() / "runs" / "d2t2p2-interleaved" / "model.safetensors");
  REQUIRE(three_d.size() == whole.size());
  bool has_lm_head = false;
  for (size_t i = 0; i < whole.size(); ++i) {
    INFO(whole[i].name);
    REQUIRE(three_d[i].name == whole[i].name);
    has_lm_head |= whole[i].name == "lm_head.weight";
    const auto a = floats_of(whole[i]), b = floats_of(three_d[i]);
    double worst = 0;
    for (size_t j = 0; j < a.size(); ++j) worst = std::max(worst, double(std::fabs(a[j] - b[j])));
    CHECK(worst < 1e-4);
  }
  CHECK(has_lm_head);
}

TEST_CASE("llama with a tied head, bf16 and fp16: layouts reproduce the single worker",
          "[train][layout][llama][mixed]") {
  TempDir dir("layouts_llama_mixed");
  const std::string tied =
      "{type: llama, vocab_size: 64, seq_len: 16, n_layer: 4, n_head: 4, n_kv_head: 2, "
      "d_model: 32, ffn_hidden: 48, tie_embeddings: true}";
  std::vector<double> fp32;  // the single fp32 worker: reduced precision's reference
  for (const std::string precision : {"fp32", "bf16", "fp16"}) {
    const Run one =
        train_layout(dir.path(), "one-" + precision, "{dp: 1, tp: 1, pp: 1}", precision, "", tied);
    // pp 2 exchanges the tied embedding's gradient between the pipeline's ends.
    const Run run = train_layout(dir.path(), "d2t2p2-" + precision, "{dp: 2, tp: 2, pp: 2}",
                                 precision, "", tied);
    if (precision == "fp32") {
      fp32 = one.losses;
      for (size_t s = 0; s < one.losses.size(); ++s) {
        INFO(precision << " step " << s + 1);
        CHECK(run.losses[s] == Approx(one.losses[s]).epsilon(kFp32LayoutTolerance));
      }
    } else {
      check_within_rounding(precision, precision, run.losses, one.losses, fp32);
    }
  }
}

TEST_CASE("zb1p: the same run as 1f1b, to the bit, on every pipeline layout",
          "[train][layout][zero_bubble]") {
  // B then W adds each weight's gradients in 1F1B's order with the same kernels
  // (model/deferred_weight_grads.h): the losses, gradient norms and validation loss are
  // 1F1B's exactly, with and without recomputation and ZeRO; gpt and llama. Global batch 8
  // at micro-batch 2: 4 micro-batches (dp 1) or 2 (dp 2) per step.
  TempDir dir("layouts_zero_bubble");
  struct Case {
    std::string name, parallel, training, model;
  };
  const std::vector<Case> cases = {{"d1t1p2", "{dp: 1, tp: 1, pp: 2", "", kGptModel},
                                   {"d2t2p2-zero2", "{dp: 2, tp: 2, pp: 2, zero: 2", "", kGptModel},
                                   {"d1t2p2-selective", "{dp: 1, tp: 2, pp: 2",
                                    ", activation_checkpointing: selective", kGptModel},
                                   {"llama-d2t1p2-zero1-full", "{dp: 2, tp: 1, pp: 2, zero: 1",
                                    ", activation_checkpointing: full", kLlamaModel},
                                   {"llama-d1t2p2", "{dp: 1, tp: 2, pp: 2", "", kLlamaModel}};
  for (const Case& c : cases) {
    const Run one = train_layout(dir.path(), c.name + "-1f1b", c.parallel + ", schedule: 1f1b}",
                                 "fp32", c.training, c.model);
    const Run zb = train_layout(dir.path(), c.name + "-zb1p", c.parallel + ", schedule: zb1p}",
                                "fp32", c.training, c.model);
    INFO(c.name);
    CHECK(zb.losses == one.losses);
    CHECK(zb.grad_norms == one.grad_norms);
    CHECK(zb.val_loss == one.val_loss);
    CHECK(zb.rows.back().contains("pipeline_idle_ms"));
  }
}

TEST_CASE("zbv: every pipeline layout reproduces the single-worker run",
          "[train][layout][zero_bubble][zbv]") {
  // Two chunks of one block per rank in V order: rank 0 holds blocks 0 and 3 with the
  // embedding and the (tied, for gpt) LM head, rank 1 blocks 1 and 2 with the turn of the
  // V. Within 2e-5 of one worker (the tied embedding's two gradient halves add in another
  // order); the exported model matches the single worker's.
  TempDir dir("layouts_zbv");
  struct Case {
    std::string name, parallel, training, model;
  };
  const std::string zbv = "schedule: zbv, virtual_stages: 2";
  const std::vector<Case> cases = {
      {"d1t1p2", "{dp: 1, tp: 1, pp: 2, " + zbv + "}", "", kGptModel},
      {"d2t1p2", "{dp: 2, tp: 1, pp: 2, " + zbv + "}", "", kGptModel},
      {"d1t2p2", "{dp: 1, tp: 2, pp: 2, " + zbv + "}", "", kGptModel},
      {"d2t1p2-zero1", "{dp: 2, tp: 1, pp: 2, zero: 1, " + zbv + "}", "", kGptModel},
      {"d1t1p2-full", "{dp: 1, tp: 1, pp: 2, " + zbv + "}", ", activation_checkpointing: full",
       kGptModel},
      {"llama-d1t1p2", "{dp: 1, tp: 1, pp: 2, " + zbv + "}", "", kLlamaModel},
      {"llama-d2t1p2-zero1-selective", "{dp: 2, tp: 1, pp: 2, zero: 1, " + zbv + "}",
       ", activation_checkpointing: selective", kLlamaModel}};
  const Run gpt = train_layout(dir.path(), "gpt-d1t1p1", "{dp: 1, tp: 1, pp: 1}");
  const Run llama =
      train_layout(dir.path(), "llama-d1t1p1", "{dp: 1, tp: 1, pp: 1}", "fp32", "", kLlamaModel);
  for (const Case& c : cases) {
    const Run run = train_layout(dir.path(), c.name, c.parallel, "fp32", c.training, c.model);
    const Run& ref = c.model == kGptModel ? gpt : llama;
    for (size_t s = 0; s < ref.losses.size(); ++s) {
      INFO(c.name << " step " << s + 1);
      CHECK(run.losses[s] == Approx(ref.losses[s]).epsilon(2e-5));
      CHECK(run.grad_norms[s] == Approx(ref.grad_norms[s]).epsilon(1e-4));
    }
    INFO(c.name << " validation");
    CHECK(run.val_loss == Approx(ref.val_loss).epsilon(2e-5));
  }
  // The export gathers rank 0's two chunks and rank 1's middle ones into the global model.
  const auto whole = trainctl::checkpoint::read_safetensors(dir.path() / "runs" / "gpt-d1t1p1" /
                                                            "model.safetensors");
  const auto v =
      trainctl::checkpoint::read_safetensors(dir.path() / "runs" / "d2t1p2" / "model.safetensors");
  REQUIRE(v.size() == whole.size());
  for (size_t i = 0; i < whole.size(); ++i) {
    INFO(whole[i].name);
    REQUIRE(v[i].name == whole[i].name);
    const std::vector<float> a = floats_of(whole[i]), b = floats_of(v[i]);
    REQUIRE(a.size() == b.size());
    for (size_t k = 0; k < a.size(); ++k) CHECK(b[k] == Approx(a[k]).margin(1e-4));
  }
}
