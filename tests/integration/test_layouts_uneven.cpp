// Uneven pipeline stages (parallel.layers_per_stage, stage_balance: auto) in the
// layout-equivalence matrix (DESIGN.md, "How correctness is proven"): a 5-block model,
// which no pp of 2 splits equally, trained with every split of its blocks over the
// pipeline's stages gives the same losses and exported model as one worker, for GPT and
// Llama, with recomputation and ZeRO-1/2/3, and the interleaved and zbv schedules; and a checkpoint
// written under one split resumes under another.
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "checkpoint/safetensors.h"
#include "integration/helpers.h"

using namespace trainctl::test;
using nlohmann::json;

namespace {

const std::string kGpt = "{vocab_size: 64, seq_len: 16, n_layer: 5, n_head: 4, d_model: 32}";
const std::string kLlama =
    "{type: llama, vocab_size: 64, seq_len: 16, n_layer: 5, n_head: 4, n_kv_head: 2, "
    "d_model: 32, ffn_hidden: 48}";

fs::path write_job(const fs::path& dir, const std::string& name, const std::string& model,
                   const std::string& parallel, const std::string& training) {
  const fs::path job = dir / (name + ".yaml");
  write_text(job, "name: " + name + "\nseed: 11\nmodel: " + model +
                      "\ndata: {type: synthetic}\nparallel: " + parallel +
                      "\ntraining: {steps: 6, micro_batch_size: 2, global_batch_size: 8" +
                      training +
                      "}\n"
                      "optimizer: {lr: 1.0e-2, warmup_steps: 1, min_lr: 1.0e-3}\n"
                      "checkpoint: {every_steps: 3, async: false}\n"
                      "logging: {every_steps: 1}\n"
                      "runtime: {comm_timeout_s: 60}\n");
  return job;
}

// step -> loss of a finished run.
std::map<int, double> losses_of(const fs::path& run) {
  std::map<int, double> out;
  std::istringstream in(read_text(run / "metrics.jsonl"));
  for (std::string line; std::getline(in, line);) {
    const json row = json::parse(line);
    out[row["step"].get<int>()] = row["loss"].get<double>();
  }
  return out;
}

std::map<int, double> train(const fs::path& dir, const std::string& name, const fs::path& job,
                            std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"train", job.string()};
  args.insert(args.end(), extra.begin(), extra.end());
  const ProcResult r = run_trainctl(args, dir, std::chrono::seconds(180));
  INFO(name << "\n" << r.out << r.err);
  REQUIRE(r.exit_code == 0);
  return losses_of(dir / "runs" / name);
}

void check_same(const std::string& name, const std::map<int, double>& got,
                const std::map<int, double>& want) {
  for (const auto& [step, loss] : got) {
    INFO(name << " step " << step);
    REQUIRE(want.count(step) == 1);
    // As the 3D matrix: layouts differ only in the order of fp32 sums.
    CHECK(loss == Approx(want.at(step)).epsilon(2e-5));
  }
}

// The exported model (reassembled from every stage's shard) is the single worker's.
void check_same_export(const fs::path& got_file, const fs::path& want_file) {
  const auto want = trainctl::checkpoint::read_safetensors(want_file);
  const auto got = trainctl::checkpoint::read_safetensors(got_file);
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    INFO(got_file << ": " << want[i].name);
    REQUIRE(got[i].name == want[i].name);
    REQUIRE(got[i].tensor.shape() == want[i].tensor.shape());
    const float* a = want[i].tensor.data<float>();
    const float* b = got[i].tensor.data<float>();
    double worst = 0;
    for (int64_t j = 0; j < want[i].tensor.numel(); ++j)
      worst = std::max(worst, static_cast<double>(std::fabs(a[j] - b[j])));
    CHECK(worst < 1e-4);
  }
}

}  // namespace

TEST_CASE("uneven pipeline stages reproduce the single-worker run", "[train][layout][uneven]") {
  TempDir dir("layouts_uneven");
  struct Case {
    std::string name, parallel, training;
    std::string rank0;  // the blocks rank 0 holds (its log says): the split was applied
  };
  const std::vector<Case> cases = {
      {"p2-auto", "{pp: 2}", "", "blocks 0-2, embedding"},
      {"p2-1-4-gpipe", "{pp: 2, schedule: gpipe, layers_per_stage: [1, 4]}", "",
       "blocks 0-0, embedding"},
      {"d2p2-4-1-zero1", "{dp: 2, pp: 2, zero: 1, layers_per_stage: [4, 1]}", "",
       "blocks 0-3, embedding"},
      {"t2p2-2-3-full", "{tp: 2, pp: 2, layers_per_stage: [2, 3]}",
       ", activation_checkpointing: full", "blocks 0-1, embedding"},
      {"d2t2p2-3-2-zero2-selective", "{dp: 2, tp: 2, pp: 2, zero: 2, layers_per_stage: [3, 2]}",
       ", activation_checkpointing: selective", "blocks 0-2, embedding"},
      {"p3-1-3-1", "{pp: 3, layers_per_stage: [1, 3, 1]}", "", "blocks 0-0, embedding"},
      {"d2p2-1-4-zero3", "{dp: 2, pp: 2, zero: 3, layers_per_stage: [1, 4]}", "",
       "blocks 0-0, embedding"},
      {"p2-interleaved-2-1-1-1",
       "{pp: 2, schedule: interleaved, virtual_stages: 2, layers_per_stage: [2, 1, 1, 1]}", "",
       "blocks 0-1, blocks 3-3, embedding"},
      // V order: rank 0 holds virtual stages 0 and 3 (the embedding and the LM head).
      {"p2-zbv-1-2-1-1",
       "{pp: 2, schedule: zbv, virtual_stages: 2, layers_per_stage: [1, 2, 1, 1]}", "",
       "blocks 0-0, blocks 4-4, embedding"}};
  for (const auto& [family, model] :
       std::vector<std::pair<std::string, std::string>>{{"gpt", kGpt}, {"llama", kLlama}}) {
    const std::string one = family + "-d1t1p1";
    const auto want = train(dir.path(), one, write_job(dir.path(), one, model, "{dp: 1}", ""));
    REQUIRE(want.size() == 6);
    for (const Case& c : cases) {
      const std::string name = family + "-" + c.name;
      const auto got =
          train(dir.path(), name, write_job(dir.path(), name, model, c.parallel, c.training));
      REQUIRE(got.size() == 6);
      CHECK_THAT(read_text(dir.path() / "runs" / name / "logs" / "rank0.log"),
                 Catch::Contains("shard: " + c.rank0));
      check_same(name, got, want);
      check_same_export(dir.path() / "runs" / name / "model.safetensors",
                        dir.path() / "runs" / one / "model.safetensors");
    }
  }
}

TEST_CASE("a checkpoint written under one stage split resumes under another",
          "[train][layout][uneven][resume]") {
  TempDir dir("resume_uneven");
  const fs::path ref = write_job(dir.path(), "ref", kGpt, "{dp: 1}", "");
  const auto want = train(dir.path(), "ref", ref);
  // Written by pp 2 with blocks 0 | 1-4, resumed at step 3 by blocks 0-3 | 4 (ZeRO-1 over
  // dp 2), by stage_balance: auto, and by one worker.
  const fs::path from =
      write_job(dir.path(), "from", kGpt, "{pp: 2, layers_per_stage: [1, 4]}", "");
  check_same("from", train(dir.path(), "from", from), want);
  const std::string step3 =
      (dir.path() / "runs" / "from" / "checkpoints" / "step_00000003").string();
  for (const auto& [name, parallel] : std::vector<std::pair<std::string, std::string>>{
           {"to-4-1", "{dp: 2, pp: 2, zero: 1, layers_per_stage: [4, 1]}"},
           {"to-auto", "{pp: 2, stage_balance: auto}"},
           {"to-one", "{dp: 1}"}}) {
    const auto got = train(dir.path(), name, write_job(dir.path(), name, kGpt, parallel, ""),
                           {"--resume", step3});
    REQUIRE(got.size() == 3);  // steps 4-6
    check_same(name, got, want);
  }
}
