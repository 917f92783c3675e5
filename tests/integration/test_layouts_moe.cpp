// The layout-equivalence matrix for mixture-of-experts models (model/moe/, DESIGN.md "How
// correctness is proven"): the same MoE job trained under dp, tp and pp in {1, 2} gives the
// same per-step losses and gradient norms as one worker, for both families and every
// balance mode (aux_loss, bias, none); a checkpoint of an MoE model (its expert biases
// included) resumes onto another layout; the MoE metrics reach metrics.jsonl and the report.
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
  std::vector<json> imbalance;  // each line's moe_load_imbalance
  std::vector<double> aux;      // each line's moe_aux_loss (balance: aux_loss)
};

// 4 blocks, vocab 64, micro-batch 2, global batch 8 (as test_layouts_3d.cpp). gpt: MoE in
// layers 1 and 3 (every_2); llama (Mixtral): every layer, with a shared expert.
std::string model_of(const std::string& family, const std::string& balance) {
  const std::string moe =
      "moe: {num_experts: 4, top_k: 2, expert_ffn_hidden: 24, balance: " + balance +
      ", aux_loss_coef: 0.05, bias_update_rate: 0.05";
  if (family == "gpt") {
    return "{vocab_size: 64, seq_len: 16, n_layer: 4, n_head: 4, d_model: 32, " + moe +
           ", layers: every_2}}";
  }
  return "{type: llama, vocab_size: 64, seq_len: 16, n_layer: 4, n_head: 4, n_kv_head: 2, "
         "d_model: 32, ffn_hidden: 48, " +
         moe + ", score: sigmoid, shared_experts: 1}}";
}

void write_job(const fs::path& file, const std::string& name, const std::string& model,
               const std::string& parallel, const std::string& extra = "", int steps = 6) {
  const std::string n = std::to_string(steps);
  write_text(file, "name: " + name + "\nseed: 11\nmodel: " + model +
                       "\ndata: {type: synthetic}\nparallel: " + parallel +
                       "\ntraining: {steps: " + n +
                       ", micro_batch_size: 2, global_batch_size: 8, "
                       "eval_every: " +
                       n +
                       ", eval_batches: 3}\n"
                       "optimizer: {lr: 1.0e-2, warmup_steps: 1, min_lr: 1.0e-3}\n"
                       "logging: {every_steps: 1}\nruntime: {comm_timeout_s: 60}\n" +
                       extra);
}

Run read_run(const fs::path& run_dir) {
  Run run;
  std::istringstream in(read_text(run_dir / "metrics.jsonl"));
  for (std::string line; std::getline(in, line);) {
    const json row = json::parse(line);
    run.losses.push_back(row["loss"].get<double>());
    run.grad_norms.push_back(row["grad_norm"].get<double>());
    if (row.contains("val_loss")) run.val_loss = row["val_loss"];
    run.imbalance.push_back(row.value("moe_load_imbalance", json()));
    if (row.contains("moe_aux_loss")) run.aux.push_back(row["moe_aux_loss"].get<double>());
  }
  return run;
}

Run train_layout(const fs::path& dir, const std::string& name, const std::string& model,
                 const std::string& parallel, const std::string& extra = "", int steps = 6) {
  const fs::path job = dir / (name + ".yaml");
  write_job(job, name, model, parallel, extra, steps);
  const ProcResult r = run_trainctl({"train", job.string()}, dir, std::chrono::seconds(300));
  INFO(name << "\n" << r.out << r.err);
  REQUIRE(r.exit_code == 0);
  Run run = read_run(dir / "runs" / name);
  REQUIRE(run.losses.size() == static_cast<size_t>(steps));
  return run;
}

}  // namespace

TEST_CASE("MoE: every dp x tp x pp layout reproduces the single-worker run",
          "[train][layout][moe]") {
  TempDir dir("layouts-moe");
  struct Case {
    std::string family, balance;
  };
  std::map<std::string, Run> refs;
  for (const Case& m : {Case{"gpt", "aux_loss"}, Case{"llama", "aux_loss"}, Case{"gpt", "none"},
                        Case{"llama", "none"}, Case{"gpt", "bias"}, Case{"llama", "bias"}}) {
    const std::string model = model_of(m.family, m.balance);
    const std::string tag = m.family + "-" + m.balance;
    std::vector<std::pair<std::string, std::string>> layouts = {
        {"d2t1p1", "{dp: 2}"}, {"d1t2p1", "{tp: 2}"}, {"d1t1p2", "{pp: 2, schedule: 1f1b}"}};
    if (m.balance != "none") layouts.push_back({"d2t2p2", "{dp: 2, tp: 2, pp: 2}"});
    if (m.balance == "aux_loss") {
      layouts.push_back({"d2t1p1-zero3", "{dp: 2, zero: 3}"});
      // zb1p: the experts' weight gradients stay in B (model/deferred_weight_grads.h).
      layouts.push_back({"d2t1p2-zb1p-zero1", "{dp: 2, pp: 2, schedule: zb1p, zero: 1}"});
      // zbv: two chunks per rank in V order, the router's aux loss on every chunk.
      layouts.push_back(
          {"d2t1p2-zbv-zero1", "{dp: 2, pp: 2, schedule: zbv, virtual_stages: 2, zero: 1}"});
    }
    const Run ref = train_layout(dir.path(), tag + "-d1t1p1", model, "{dp: 1}");
    refs[tag] = ref;
    for (const auto& [layout, parallel] : layouts) {
      const Run run = train_layout(dir.path(), tag + "-" + layout, model, parallel);
      for (size_t s = 0; s < ref.losses.size(); ++s) {
        INFO(tag << " " << layout << " step " << s + 1);
        CHECK(run.losses[s] == Approx(ref.losses[s]).epsilon(kFp32LayoutTolerance));
        CHECK(run.grad_norms[s] == Approx(ref.grad_norms[s]).epsilon(1e-4));
      }
      INFO(tag << " " << layout << " validation");
      CHECK(run.val_loss == Approx(ref.val_loss).epsilon(kFp32LayoutTolerance));
      // The routing statistics are sums over the step's tokens: the same on every layout.
      for (size_t s = 0; s < ref.imbalance.size(); ++s) {
        INFO(tag << " " << layout << " step " << s + 1 << " imbalance " << run.imbalance[s]);
        REQUIRE(run.imbalance[s].size() == 4);
        for (size_t l = 0; l < 4; ++l) {
          if (ref.imbalance[s][l].is_null()) {
            CHECK(run.imbalance[s][l].is_null());
          } else {
            CHECK(run.imbalance[s][l].get<double>() ==
                  Approx(ref.imbalance[s][l].get<double>()).epsilon(1e-6));
          }
        }
      }
    }
  }
  // The bias moves the routing: from step 2 on (the first update follows step 1), balance:
  // bias trains differently from balance: none.
  for (const std::string family : {"gpt", "llama"}) {
    const Run& bias = refs[family + "-bias"];
    const Run& none = refs[family + "-none"];
    INFO(family);
    CHECK(bias.losses[0] == none.losses[0]);
    CHECK(bias.losses[5] != none.losses[5]);
  }
}

TEST_CASE("MoE: a checkpoint resumes on the same and on another layout", "[resume][moe]") {
  TempDir dir("resume-moe");
  // llama-bias: the expert biases after step 3 come back from the checkpoint (without them
  // the routing, and so the losses, of steps 4-6 would differ).
  for (const std::string variant : {"gpt", "llama", "llama-bias"}) {
    const std::string family = variant.substr(0, variant.find('-'));
    const std::string model = model_of(family, variant == "llama-bias" ? "bias" : "aux_loss");
    const fs::path job = dir.path() / (variant + ".yaml");
    write_job(job, variant, model, "{dp: 1}", "checkpoint: {every_steps: 3, async: false}\n");
    const fs::path ref = dir.path() / (variant + "-ref");
    const ProcResult straight =
        run_trainctl({"train", job.string(), "--set", "run_dir=" + ref.string()}, dir.path(),
                     std::chrono::seconds(180));
    INFO(straight.out << straight.err);
    REQUIRE(straight.exit_code == 0);
    const Run want = read_run(ref);
    const std::string step3 = (ref / "checkpoints" / "step_00000003").string();
    for (const std::string layout : {"dp1", "tp2", "pp2"}) {
      const fs::path out = dir.path() / (variant + "-" + layout);
      std::vector<std::string> args = {"train",    job.string(), "--set", "run_dir=" + out.string(),
                                       "--resume", step3};
      if (layout == "tp2") args.insert(args.end(), {"--set", "parallel.tp=2"});
      if (layout == "pp2") args.insert(args.end(), {"--set", "parallel.pp=2"});
      const ProcResult r = run_trainctl(args, dir.path(), std::chrono::seconds(180));
      INFO(variant << " " << layout << "\n" << r.out << r.err);
      REQUIRE(r.exit_code == 0);
      const Run got = read_run(out);
      REQUIRE(got.losses.size() == 3);  // steps 4-6
      for (size_t s = 0; s < 3; ++s) {
        INFO(variant << " " << layout << " step " << s + 4);
        if (layout == "dp1") {
          CHECK(got.losses[s] == want.losses[s + 3]);  // same layout: bit for bit
        } else {
          CHECK(got.losses[s] == Approx(want.losses[s + 3]).epsilon(kFp32LayoutTolerance));
        }
      }
    }
  }
}

TEST_CASE("MoE: plan and validate print total and active parameters", "[plan][moe]") {
  TempDir dir("plan-moe");
  const fs::path job = dir.path() / "job.yaml";
  write_job(job, "plan", model_of("gpt", "aux_loss"), "{pp: 2}");
  // Dense: 64·32 + 16·32 + 4·(12·32² + 13·32) + 2·32 = 53440. Layers 1 and 3 swap their
  // MLP (2·128·32 + 128 + 32 = 8352) for a router (4·32) and 4 experts of 2·24·32 + 24 + 32
  // = 1592: 49728 in all; a token uses 2 of the 4 experts: 49728 - 2·2·1592 = 43360.
  const ProcResult plan = run_trainctl({"plan", job.string()}, dir.path());
  INFO(plan.out << plan.err);
  REQUIRE(plan.exit_code == 0);
  CHECK_THAT(plan.out, Catch::Contains("parameters: 49728 total, 43360 active per token"));
  const ProcResult validate = run_trainctl({"validate", job.string()}, dir.path());
  INFO(validate.out << validate.err);
  REQUIRE(validate.exit_code == 0);
  CHECK_THAT(validate.out, Catch::Contains("parameters: 49.7K total, 43.4K active per token"));
  CHECK_THAT(validate.out, Catch::Contains("moe:        4 experts x 24, top 2 (softmax), layers "
                                           "every_2 (2 of 4), balance aux_loss, dropless"));
}

TEST_CASE("MoE: metrics.jsonl, TensorBoard and the report show the routing", "[metrics][moe]") {
  TempDir dir("metrics-moe");
  const fs::path job = dir.path() / "m.yaml";
  // A capacity of 1.0 on gpt's layers 1 and 3 drops the tokens an expert gets over its
  // fair share; pp 2 puts one MoE layer on each stage.
  std::string model = model_of("gpt", "aux_loss");
  model.insert(model.size() - 2, ", capacity_factor: 1.0");
  write_job(job, "m", model, "{dp: 2, pp: 2}");
  const ProcResult r = run_trainctl({"train", job.string()}, dir.path(), std::chrono::seconds(180));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  std::istringstream in(read_text(dir.path() / "runs" / "m" / "metrics.jsonl"));
  int lines = 0;
  for (std::string line; std::getline(in, line); ++lines) {
    const json row = json::parse(line);
    INFO(line);
    REQUIRE(row.contains("moe_aux_loss"));
    // coef * sum_e f_e P_e over two layers: near 2 * 0.05 * 1 (its balanced value).
    CHECK(row["moe_aux_loss"].get<double>() > 0.05);
    CHECK(row["moe_aux_loss"].get<double>() < 0.4);
    const json& imbalance = row["moe_load_imbalance"];
    REQUIRE(imbalance.size() == 4);
    CHECK((imbalance[0].is_null() && imbalance[2].is_null()));
    for (const int l : {1, 3}) {
      CHECK(imbalance[l].get<double>() >= 1.0);
      CHECK(imbalance[l].get<double>() <= 2.0);  // top 2 of 4: no expert holds over half
      double shares = 0;
      for (const json& s : row["moe_expert_load"][l]) shares += s.get<double>();
      CHECK(shares == Approx(1.0).epsilon(1e-5));
    }
    CHECK(row["moe_dropped_fraction"].get<double>() >= 0.0);
    CHECK(row["moe_dropped_fraction"].get<double>() < 0.5);
  }
  CHECK(lines == 6);
  const fs::path html = dir.path() / "r.html";
  const ProcResult rep = run_trainctl(
      {"report", (dir.path() / "runs" / "m").string(), "--out", html.string()}, dir.path());
  INFO(rep.out << rep.err);
  REQUIRE(rep.exit_code == 0);
  const std::string page = read_text(html);
  CHECK_THAT(page, Catch::Contains("Mixture of experts"));
  CHECK_THAT(page, Catch::Contains("expert load, layer 1"));
  CHECK_THAT(page, Catch::Contains("expert load, layer 3"));
  CHECK_THAT(page, Catch::Contains("MoE load imbalance"));
}

TEST_CASE("MoE: balance: bias lowers the load imbalance", "[train][moe]") {
  TempDir dir("balance-moe");
  // 30 steps of the llama MoE at the default bias_update_rate (1e-3): the sigmoid router's
  // scores differ by hundredths here, so the bias steps move tokens a few at a time.
  std::map<std::string, double> imbalance;
  for (const std::string balance : {"bias", "none"}) {
    std::string model = model_of("llama", balance);
    model.replace(model.find("bias_update_rate: 0.05"), 22, "bias_update_rate: 1.0e-3");
    const fs::path job = dir.path() / (balance + ".yaml");
    write_job(job, balance, model, "{dp: 1}");
    const ProcResult r = run_trainctl(
        {"train", job.string(), "--set", "training.steps=30", "--set", "training.eval_every=0"},
        dir.path(), std::chrono::seconds(180));
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    const Run run = read_run(dir.path() / "runs" / balance);
    REQUIRE(run.imbalance.size() == 30);
    // The mean over the layers and the last 10 steps.
    double sum = 0;
    for (size_t s = 20; s < 30; ++s) {
      for (const json& v : run.imbalance[s]) sum += v.get<double>();
    }
    imbalance[balance] = sum / 40;
  }
  INFO("bias " << imbalance["bias"] << " none " << imbalance["none"]);
  CHECK(imbalance["bias"] < imbalance["none"] - 0.03);
}

// Expert parallelism (parallel.ep): the experts split over ep of the DP ranks, tokens sent to
// them by all-to-all, expert gradients summed over the DP ranks holding the same experts.
// Dropless routing, 20 steps, both families: every layout matches one worker. d4e2 has two
// ranks per expert block (the expert-DP sum is real; ZeRO shards over those two ranks, and
// ZeRO-2 first sums the dense gradients over the ep group), d2e2 recompute runs the all-to-all
// again in the backward pass's recomputation, and 20 steps under a 3-batch evaluation make
// the ep ranks evaluate in lock-step.
TEST_CASE("MoE: expert parallelism in every layout reproduces the single-worker run",
          "[train][layout][moe][ep]") {
  TempDir dir("layouts-moe-ep");
  const int steps = 20;
  for (const std::string family : {"gpt", "llama"}) {
    const std::string model = model_of(family, "aux_loss");
    const Run ref = train_layout(dir.path(), family + "-d1", model, "{dp: 1}", "", steps);
    const std::vector<std::pair<std::string, std::string>> layouts = {
        {"d2e2", "{dp: 2, ep: 2}"},
        {"d4e2", "{dp: 4, ep: 2}"},
        {"d4e2-zero1", "{dp: 4, ep: 2, zero: 1}"},
        {"d4e2-zero2", "{dp: 4, ep: 2, zero: 2}"},
        {"d2e2p2-zero2", "{dp: 2, ep: 2, pp: 2, zero: 2}"},
        {"d4e4", "{dp: 4, ep: 4}"},
        {"d2e2t2", "{dp: 2, ep: 2, tp: 2}"},
        {"d2e2p2", "{dp: 2, ep: 2, pp: 2, schedule: 1f1b}"},
        {"d2e2p2-gpipe", "{dp: 2, ep: 2, pp: 2, schedule: gpipe}"},
        {"d2e2p2-interleaved", "{dp: 2, ep: 2, pp: 2, schedule: interleaved, virtual_stages: 2}"},
        {"d2e2p2-zb1p", "{dp: 2, ep: 2, pp: 2, schedule: zb1p}"},
        {"d2e2p2-zbv", "{dp: 2, ep: 2, pp: 2, schedule: zbv, virtual_stages: 2}"},
        {"d2e2t2p2", "{dp: 2, ep: 2, tp: 2, pp: 2}"},
    };
    auto compare = [&](const std::string& layout, const Run& run) {
      for (size_t s = 0; s < ref.losses.size(); ++s) {
        INFO(family << " " << layout << " step " << s + 1);
        CHECK(run.losses[s] == Approx(ref.losses[s]).epsilon(kFp32LayoutTolerance));
        CHECK(run.grad_norms[s] == Approx(ref.grad_norms[s]).epsilon(1e-4));
      }
      INFO(family << " " << layout << " validation");
      CHECK(run.val_loss == Approx(ref.val_loss).epsilon(kFp32LayoutTolerance));
    };
    for (const auto& [layout, parallel] : layouts) {
      compare(layout, train_layout(dir.path(), family + "-" + layout, model, parallel, "", steps));
    }
    for (const std::string recompute : {"full", "selective"}) {
      const std::string name = family + "-d2e2-" + recompute;
      // The spec's training line is fixed: the override goes on the command line.
      const fs::path job = dir.path() / (name + ".yaml");
      write_job(job, name, model, "{dp: 2, ep: 2}", "", steps);
      const ProcResult r = run_trainctl(
          {"train", job.string(), "--set", "training.activation_checkpointing=" + recompute},
          dir.path(), std::chrono::seconds(300));
      INFO(name << "\n" << r.out << r.err);
      REQUIRE(r.exit_code == 0);
      compare("d2e2 recompute " + recompute, read_run(dir.path() / "runs" / name));
    }
  }
}

// Context parallelism (parallel.cp) splits each sequence over the cp ranks, so the router's
// per-sequence counts (the sequence-wise aux loss, model/moe/router.h) are summed around the
// CP ring. Dropless, 20 steps, both families and both balance modes with a signal: every
// cp layout matches one worker, the aux loss included, with expert parallelism too.
TEST_CASE("MoE: context-parallel layouts reproduce the single-worker run",
          "[train][layout][moe][cp]") {
  TempDir dir("layouts-moe-cp");
  const int steps = 20;
  for (const auto& [family, balance] : std::vector<std::pair<std::string, std::string>>{
           {"gpt", "aux_loss"}, {"llama", "aux_loss"}, {"llama", "bias"}}) {
    const std::string model = model_of(family, balance);
    const std::string tag = family + "-" + balance;
    const Run ref = train_layout(dir.path(), tag + "-c1", model, "{dp: 1}", "", steps);
    // d2e2c2: expert parallelism at each cp coordinate, expert gradients over dp/ep x cp.
    std::vector<std::pair<std::string, std::string>> layouts = {
        {"c2", "{cp: 2}"},
        {"d2c2", "{dp: 2, cp: 2}"},
        {"p2c2", "{pp: 2, cp: 2, schedule: 1f1b}"},
        {"d2e2c2", "{dp: 2, ep: 2, cp: 2}"}};
    if (balance == "aux_loss") {
      layouts.push_back({"c4", "{cp: 4}"});
      layouts.push_back({"t2c2-sp", "{tp: 2, cp: 2, sequence_parallel: true}"});
      layouts.push_back({"d2c2-zero1", "{dp: 2, cp: 2, zero: 1}"});
      layouts.push_back({"d2e2c2-zero2", "{dp: 2, ep: 2, cp: 2, zero: 2}"});
    }
    for (const auto& [layout, parallel] : layouts) {
      const Run run = train_layout(dir.path(), tag + "-" + layout, model, parallel, "", steps);
      REQUIRE(run.aux.size() == ref.aux.size());
      for (size_t s = 0; s < ref.losses.size(); ++s) {
        INFO(tag << " " << layout << " step " << s + 1);
        CHECK(run.losses[s] == Approx(ref.losses[s]).epsilon(kFp32LayoutTolerance));
        CHECK(run.grad_norms[s] == Approx(ref.grad_norms[s]).epsilon(1e-4));
        if (!ref.aux.empty()) CHECK(run.aux[s] == Approx(ref.aux[s]).epsilon(kFp32LayoutTolerance));
        // The same routing: each layer's load imbalance, counted once per token.
        REQUIRE(run.imbalance[s].size() == ref.imbalance[s].size());
        for (size_t l = 0; l < ref.imbalance[s].size(); ++l) {
          if (ref.imbalance[s][l].is_number()) {
            CHECK(run.imbalance[s][l].get<double>() == Approx(ref.imbalance[s][l].get<double>()));
          }
        }
      }
      INFO(tag << " " << layout << " validation");
      CHECK(run.val_loss == Approx(ref.val_loss).epsilon(kFp32LayoutTolerance));
    }
  }
}

// bf16 and fp16 matrix products (fp16 with its dynamic loss scale) with expert parallelism:
// the experts' products round the same operands whichever rank runs them, and the
// all-to-all moves fp32 rows, so each layout stays within the reach of the format's own
// rounding of the single worker in the same precision (integration/rounding_bounds.h).
TEST_CASE("MoE: expert parallelism under bf16 and fp16 reproduces the single worker",
          "[train][layout][moe][ep][mixed]") {
  TempDir dir("layouts-moe-ep-mixed");
  const std::string model = model_of("llama", "aux_loss");
  const Run fp32 = train_layout(dir.path(), "fp32-d1", model, "{dp: 1}");
  for (const std::string precision : {"bf16", "fp16"}) {
    const std::string extra = "precision: {compute: " + precision + "}\n";
    const Run one = train_layout(dir.path(), precision + "-d1", model, "{dp: 1}", extra);
    for (const auto& [name, parallel] : std::vector<std::pair<std::string, std::string>>{
             {"d2e2", "{dp: 2, ep: 2}"}, {"d2e2p2", "{dp: 2, ep: 2, pp: 2}"}}) {
      const Run run = train_layout(dir.path(), precision + "-" + name, model, parallel, extra);
      check_within_rounding(precision + " " + name, precision, run.losses, one.losses, fp32.losses);
    }
  }
}

TEST_CASE("MoE: a checkpoint resumes across expert-parallel layouts", "[resume][moe][ep]") {
  TempDir dir("resume-moe-ep");
  const std::string ckpt = "checkpoint: {every_steps: 3, async: false}\n";
  // Written at ep 2 (each expert block by its first DP rank), resumed at ep 1 and ep 4;
  // written at ep 1, resumed at ep 2. With context parallelism and bias balancing: the
  // expert biases are written once (CP rank 0), whatever the cp and ep.
  struct Case {
    std::string from, to, name, balance;
  };
  for (const Case& c : {Case{"{dp: 2, ep: 2}", "{dp: 1}", "e2-to-e1", "aux_loss"},
                        Case{"{dp: 2, ep: 2}", "{dp: 4, ep: 4}", "e2-to-e4", "aux_loss"},
                        Case{"{dp: 1}", "{dp: 2, ep: 2}", "e1-to-e2", "aux_loss"},
                        Case{"{dp: 2, ep: 2, cp: 2}", "{dp: 1}", "e2c2-to-e1", "bias"},
                        Case{"{cp: 2}", "{dp: 2, ep: 2}", "c2-to-e2", "bias"}}) {
    const std::string model = model_of("llama", c.balance);
    const fs::path job = dir.path() / (c.name + ".yaml");
    write_job(job, c.name, model, c.from, ckpt);
    const fs::path ref = dir.path() / (c.name + "-ref");
    const ProcResult straight =
        run_trainctl({"train", job.string(), "--set", "run_dir=" + ref.string()}, dir.path(),
                     std::chrono::seconds(180));
    INFO(straight.out << straight.err);
    REQUIRE(straight.exit_code == 0);
    const Run want = read_run(ref);
    if (c.balance == "bias") {
      // One copy of each layer's expert bias, however many cp (and dp) ranks hold it.
      const json meta =
          json::parse(read_text(ref / "checkpoints" / "step_00000003" / "metadata.json"));
      std::map<std::string, int> copies;
      for (const json& f : meta["files"]) {
        for (const json& t : f["tensors"]) {
          const std::string name = t["name"];
          if (name.find("e_score_correction_bias") != std::string::npos) ++copies[name];
        }
      }
      CHECK(copies.size() == 4);  // every llama layer is MoE
      for (const auto& [name, n] : copies) {
        INFO(name);
        CHECK(n == 1);
      }
    }
    const fs::path job2 = dir.path() / (c.name + "-resumed.yaml");
    write_job(job2, c.name, model, c.to, ckpt);
    const fs::path out = dir.path() / (c.name + "-out");
    const ProcResult r =
        run_trainctl({"train", job2.string(), "--set", "run_dir=" + out.string(), "--resume",
                      (ref / "checkpoints" / "step_00000003").string()},
                     dir.path(), std::chrono::seconds(180));
    INFO(c.name << "\n" << r.out << r.err);
    REQUIRE(r.exit_code == 0);
    const Run got = read_run(out);
    REQUIRE(got.losses.size() == 3);
    for (size_t s = 0; s < 3; ++s) {
      INFO(c.name << " step " << s + 4);
      CHECK(got.losses[s] == Approx(want.losses[s + 3]).epsilon(kFp32LayoutTolerance));
    }
  }
}

TEST_CASE("MoE: plan and validate print each rank's experts, plan --cluster costs the all-to-all",
          "[plan][moe][ep]") {
  TempDir dir("plan-moe-ep");
  const fs::path job = dir.path() / "job.yaml";
  write_job(job, "plan", model_of("gpt", "aux_loss"), "{dp: 4, ep: 2}");
  // gpt experts: 2·24·32 + 24 + 32 = 1592 floats each; 2 of 4 per MoE layer on a rank, two
  // MoE layers: 4 · 1592 · 4 bytes = 25472 bytes = 0.02 MiB.
  for (const std::string cmd : {"plan", "validate"}) {
    const ProcResult r = run_trainctl({cmd, job.string()}, dir.path());
    INFO(cmd << "\n" << r.out << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains("experts per rank (ep 2, 4 routed experts per MoE layer):"));
    CHECK_THAT(r.out, Catch::Contains("stage 0: 2 experts per MoE layer, 0.02 MiB weights"));
  }
  const std::string cluster = std::string(TRAINCTL_SOURCE_DIR) + "/configs/clusters/dgx-a100.yaml";
  const ProcResult ep1 = run_trainctl(
      {"plan", job.string(), "--cluster", cluster, "--json", "--set", "parallel.ep=1"}, dir.path());
  const ProcResult ep2 = run_trainctl({"plan", job.string(), "--cluster", cluster}, dir.path());
  INFO(ep1.out << ep1.err << ep2.out << ep2.err);
  REQUIRE(ep2.exit_code == 0);
  CHECK_THAT(ep2.out, Catch::Contains("ep all-to-all"));
  REQUIRE(ep1.exit_code == 0);
  CHECK_THAT(ep1.out, Catch::Contains("\"ep_comm\":0.0"));
}
