// `trainctl sample`: text from a trained run's checkpoint, the same for a seed, independent
// of the layout that wrote the checkpoint; bad input exits 2 naming what is wrong.
#include <catch2/catch.hpp>

#include "device/cuda_plugin.h"
#include "device/make_backend.h"
#include "integration/helpers.h"
#include "unit/test_checkpoint_support.h"

using namespace trainctl::test;
namespace ckt = trainctl::checkpoint::testing;

namespace {

// 4 steps of a byte-level GPT on tp 2, a checkpoint at the end.
fs::path train_tiny(const TempDir& dir) {
  const fs::path spec = dir / "job.yaml";
  write_text(spec,
             "name: sample\nseed: 5\n"
             "model: {vocab_size: 256, seq_len: 16, n_layer: 2, n_head: 2, d_model: 16}\n"
             "data: {type: synthetic}\nparallel: {tp: 2}\n"
             "training: {steps: 4, micro_batch_size: 2, global_batch_size: 2}\n"
             "checkpoint: {every_steps: 4}\nruntime: {comm_timeout_s: 60}\n");
  const fs::path run = dir / "run";
  ProcResult r =
      run_trainctl({"train", spec.string(), "--set", "run_dir=" + run.string()}, dir.path());
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  return run;
}

ProcResult sample(const TempDir& dir, const fs::path& from, const std::string& prompt,
                  const std::string& seed, const std::string& temperature = "1.0",
                  const std::string& device = "cpu") {
  return run_trainctl({"sample", from.string(), "--prompt", prompt, "--max-new-tokens", "40",
                       "--temperature", temperature, "--seed", seed, "--device", device},
                      dir.path());
}

// Whether this process can use a GPU (the CUDA plugin loads and sees a device).
bool gpu_usable() {
  try {
    trainctl::device::make_backend(trainctl::Device::cuda, {}, 0);
    return true;
  } catch (const trainctl::device::DeviceUnavailable&) {
    return false;
  }
}

}  // namespace

TEST_CASE("sample continues a prompt from a run's checkpoint, fixed by the seed",
          "[sample][integration]") {
  TempDir dir("sample");
  const fs::path run = train_tiny(dir);
  ProcResult a = sample(dir, run, "Hello", "1");
  INFO(a.out << a.err);
  REQUIRE(a.exit_code == 0);
  CHECK(a.out.rfind("Hello", 0) == 0);
  CHECK(a.out.size() == 5 + 40 + 1);  // prompt, 40 bytes, newline
  CHECK_THAT(a.err, Catch::Contains("step 4, byte-level tokens"));
  CHECK(sample(dir, run, "Hello", "1").out == a.out);
  CHECK(sample(dir, run, "Hello", "2").out != a.out);
  ProcResult greedy = sample(dir, run, "Hello", "1", "0");
  REQUIRE(greedy.exit_code == 0);
  CHECK(sample(dir, run, "Hello", "9", "0").out == greedy.out);  // greedy ignores the seed
}

TEST_CASE("sample reads a checkpoint the same whatever layout wrote it", "[sample][integration]") {
  TempDir dir("sample");
  ckt::save_checkpoint(dir / "one" / "checkpoints", {1, 1, 1}, 3);
  ckt::save_checkpoint(dir / "four" / "checkpoints", {2, 2, 1}, 3);
  const std::string prompt = "\x01\x02\x03";  // the test model's vocabulary is 16
  ProcResult one = sample(dir, dir / "one", prompt, "4");
  ProcResult four = sample(dir, dir / "four", prompt, "4");
  INFO(one.err << four.err);
  REQUIRE(one.exit_code == 0);
  REQUIRE(four.exit_code == 0);
  CHECK(one.out == four.out);

  ProcResult outside = sample(dir, dir / "one", "hello", "4");
  CHECK(outside.exit_code == 2);
  CHECK_THAT(outside.err, Catch::Contains("outside the model's vocabulary of 16"));
}

TEST_CASE("sample refuses a missing checkpoint and an empty prompt", "[sample][integration]") {
  TempDir dir("sample");
  ProcResult missing = sample(dir, dir / "nothing", "x", "1");
  CHECK(missing.exit_code == 2);
  CHECK_THAT(missing.err, Catch::Contains("nothing"));

  ckt::save_checkpoint(dir / "run" / "checkpoints", {1, 1, 1}, 3);
  ProcResult empty = sample(dir, dir / "run", "", "1");
  CHECK(empty.exit_code == 2);
  CHECK_THAT(empty.err, Catch::Contains("--prompt is empty"));
}

TEST_CASE("sample refuses a checkpoint of another model", "[sample][integration]") {
  TempDir dir("sample");
  // The GPT's tensors under other names (as another model type would save them).
  ckt::RankTensors t = ckt::rank_tensors({1, 1, 1}, 0, false);
  for (std::string& name : t.names) name.replace(0, std::string("transformer.").size(), "model.");
  const fs::path checkpoints = dir / "run" / "checkpoints";
  const fs::path tmp = trainctl::checkpoint::begin_checkpoint(checkpoints, 3);
  trainctl::checkpoint::write_shard(tmp, 0, t.views());
  trainctl::checkpoint::write_metadata(tmp, ckt::metadata_for({1, 1, 1}, 3, tmp));
  trainctl::checkpoint::commit_checkpoint(tmp, checkpoints, 3, 0);
  ProcResult r = sample(dir, dir / "run", "\x01", "1");
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("step_00000003/metadata.json: not a gpt checkpoint as its "
                                    "metadata says (no tensor transformer.wte.weight)"));
}

TEST_CASE("sample --device cuda decodes on the GPU, or exits 2 saying why where there is none",
          "[sample][integration]") {
  TempDir dir("sample");
  const fs::path run = train_tiny(dir);
  ProcResult r = sample(dir, run, "Hello", "1", "0", "cuda");
  INFO(r.out << r.err);
  if (gpu_usable()) {
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.rfind("Hello", 0) == 0);
    CHECK(r.out.size() == 5 + 40 + 1);
    CHECK_THAT(r.err, Catch::Contains("on the GPU"));
  } else {
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("--device cuda: "));
    CHECK_THAT(r.err, Catch::Contains("--device cpu"));
  }
  ProcResult bad = sample(dir, run, "Hello", "1", "0", "tpu");
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Catch::Contains("--device"));
}
