// `trainctl ckpt info|verify|export` on checkpoints made with the library (as the training
// engine writes them): what they print, their exit codes, and the exported model.
#include <catch2/catch.hpp>

#include <fstream>

#include "checkpoint/safetensors.h"
#include "integration/helpers.h"
#include "unit/test_checkpoint_support.h"

using namespace trainctl::test;
namespace ck = trainctl::checkpoint;
namespace ckt = trainctl::checkpoint::testing;

namespace {

// A run directory with two committed checkpoints of a tp 2 × pp 2 run; latest is step 20.
void make_run(const fs::path& run) {
  ckt::save_checkpoint(run / "checkpoints", {2, 2, 1}, 10);
  ckt::save_checkpoint(run / "checkpoints", {2, 2, 1}, 20);
}

}  // namespace

TEST_CASE("ckpt info shows what the latest checkpoint of a run holds", "[ckpt][integration]") {
  TempDir dir("ckpt");
  make_run(dir / "run");
  ProcResult r = run_trainctl({"ckpt", "info", (dir / "run").string()}, dir.path());
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("checkpoints/step_00000020"));
  CHECK_THAT(r.out, Catch::Contains("step 20: resumes at step 20, 1280 samples consumed"));
  CHECK_THAT(r.out, Catch::Contains("dp 1, tp 2, pp 2, virtual stages 1, ZeRO stage 0"));
  CHECK_THAT(r.out, Catch::Contains("n_layer 4, n_head 4, d_model 8 (3696 parameters)"));
  CHECK_THAT(r.out,
             Catch::Contains("tensors: 52 model, 104 optimizer state (exp_avg, exp_avg_sq)"));
  CHECK_THAT(r.out, Catch::Contains("rank_00003.safetensors"));

  ProcResult t = run_trainctl(
      {"ckpt", "info", (dir / "run" / "checkpoints" / "step_00000010").string(), "--tensors"},
      dir.path());
  INFO(t.err);
  REQUIRE(t.exit_code == 0);
  CHECK_THAT(t.out, Catch::Contains("step 10:"));
  // std::regex recurses per character: match the one line, not the whole output.
  std::string line;
  std::istringstream lines(t.out);
  while (std::getline(lines, line) && line.find("h.0.attn.c_attn.weight") == std::string::npos) {
  }
  CHECK_THAT(line, Catch::Matches(" *transformer\\.h\\.0\\.attn\\.c_attn\\.weight +\\[24, 8\\] +"
                                  "dim 0 in 2 \\(3 blocks\\) +2"));

  ProcResult j = run_trainctl({"ckpt", "info", (dir / "run").string(), "--json"}, dir.path());
  REQUIRE(j.exit_code == 0);
  CHECK(nlohmann::json::parse(j.out)["step"] == 20);
}

TEST_CASE("ckpt verify passes an intact checkpoint and names a damaged file",
          "[ckpt][integration]") {
  TempDir dir("ckpt");
  make_run(dir / "run");
  const fs::path step = dir / "run" / "checkpoints" / "step_00000020";
  ProcResult ok = run_trainctl({"ckpt", "verify", step.string()}, dir.path());
  INFO(ok.out << ok.err);
  REQUIRE(ok.exit_code == 0);
  CHECK_THAT(ok.out, Catch::Contains("checkpoint OK: 4 files"));

  {  // flip one bit in the middle of rank 2's data
    std::fstream f(step / "rank_00002.safetensors",
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-64, std::ios::end);
    const char c = static_cast<char>(f.get());
    f.seekp(-64, std::ios::end);
    f.put(static_cast<char>(c ^ 1));
  }
  ProcResult bad = run_trainctl({"ckpt", "verify", step.string()}, dir.path());
  INFO(bad.out << bad.err);
  CHECK(bad.exit_code == 2);  // input the user can fix: pick another checkpoint
  CHECK_THAT(bad.err, Catch::Contains("rank_00002.safetensors: checksum mismatch"));
  CHECK_THAT(bad.err, Catch::Contains("resume from an older checkpoint"));
  CHECK_THAT(bad.out, Catch::Contains("checkpoint DAMAGED: 1 of 4 files failed"));

  // Exporting from the damaged checkpoint fails and leaves no file behind.
  ProcResult ex = run_trainctl(
      {"ckpt", "export", step.string(), "--out", (dir / "m.safetensors").string()}, dir.path());
  CHECK(ex.exit_code == 2);
  CHECK_THAT(ex.err, Catch::Contains("rank_00002.safetensors"));
  CHECK_FALSE(fs::exists(dir / "m.safetensors"));

  fs::resize_file(step / "rank_00001.safetensors", 100);
  ProcResult cut = run_trainctl({"ckpt", "verify", step.string()}, dir.path());
  CHECK(cut.exit_code == 2);
  CHECK_THAT(cut.err, Catch::Contains("rank_00001.safetensors: 100 bytes, expected"));
}

TEST_CASE("ckpt export writes the whole model with nanoGPT names", "[ckpt][integration]") {
  TempDir dir("ckpt");
  make_run(dir / "run");
  const fs::path out = dir / "model.safetensors";
  ProcResult r = run_trainctl(
      {"ckpt", "export", (dir / "run" / "checkpoints").string(), "--out", out.string()},
      dir.path());
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("52 tensors, 3696 parameters"));
  const std::vector<ck::NamedTensor> model = ck::read_safetensors(out);
  REQUIRE(model.size() == 52);
  CHECK(model[0].name == "transformer.wte.weight");
  const ck::NamedTensor& qkv = model[2 + 2];
  REQUIRE(qkv.name == "transformer.h.0.attn.c_attn.weight");
  CHECK(qkv.tensor.shape() == trainctl::Shape{24, 8});
  for (int64_t g = 0; g < qkv.tensor.numel(); ++g) {
    if (qkv.tensor.f32()[g] != ckt::expected_value(qkv.name, g)) FAIL("element " << g);
  }
}

TEST_CASE("ckpt refuses paths that hold no checkpoint with exit code 2", "[ckpt][integration]") {
  TempDir dir("ckpt");
  ProcResult missing = run_trainctl({"ckpt", "info", (dir / "nope").string()}, dir.path());
  CHECK(missing.exit_code == 2);
  CHECK_THAT(missing.err, Catch::Contains("does not exist"));
  fs::create_directories(dir / "empty");
  ProcResult empty = run_trainctl({"ckpt", "verify", (dir / "empty").string()}, dir.path());
  CHECK(empty.exit_code == 2);
  CHECK_THAT(empty.err, Catch::Contains("no complete checkpoint in"));
  make_run(dir / "run");
  ProcResult to_dir = run_trainctl(
      {"ckpt", "export", (dir / "run").string(), "--out", dir.path().string()}, dir.path());
  CHECK(to_dir.exit_code == 2);
  CHECK_THAT(to_dir.err, Catch::Contains("is a directory"));
  ProcResult no_out = run_trainctl({"ckpt", "export", (dir / "run").string()}, dir.path());
  CHECK(no_out.exit_code == 2);
  ProcResult help = run_trainctl({"ckpt", "export", "--help"}, dir.path());
  CHECK(help.exit_code == 0);
  CHECK_THAT(help.out, Catch::Contains("trainctl ckpt export runs/gpt-tiny-3d --out"));
}
