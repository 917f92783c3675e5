// A Llama model through the commands around training: a checkpoint written on tp 2 x pp 2
// resumes on other layouts with the uninterrupted run's losses, `ckpt info` / `verify`
// describe it, `eval` reproduces the logged validation loss on another layout, `sample` is
// fixed by its seed, and a GPT job refuses the Llama checkpoint (exit 2).
#include <catch2/catch.hpp>

#include <map>
#include <nlohmann/json.hpp>
#include <regex>

#include "integration/helpers.h"

using namespace trainctl::test;

namespace {

const char* kJob =
    "name: llama-cli\nseed: 5\n"
    "model: {type: llama, vocab_size: 256, seq_len: 16, n_layer: 2, n_head: 4, n_kv_head: 2,"
    " d_model: 32, ffn_hidden: 64, rope_theta: 500000}\n"
    "data: {type: synthetic}\nparallel: {tp: 2, pp: 2}\n"
    "training: {steps: 6, micro_batch_size: 2, global_batch_size: 4, eval_every: 3,"
    " eval_batches: 3}\n"
    "checkpoint: {every_steps: 3, async: false}\nlogging: {every_steps: 1}\n"
    "runtime: {comm_timeout_s: 60}\n";

// metrics.jsonl by step (a resumed run logs its steps once).
std::map<int, nlohmann::json> rows_of(const fs::path& run) {
  std::map<int, nlohmann::json> rows;
  std::istringstream in(read_text(run / "metrics.jsonl"));
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    rows[j["step"].get<int>()] = j;
  }
  return rows;
}

ProcResult train(const fs::path& dir, const fs::path& spec, const std::string& run,
                 std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"train", spec.string(), "--set",
                                   "run_dir=" + (dir / run).string()};
  args.insert(args.end(), extra.begin(), extra.end());
  return run_trainctl(args, dir, std::chrono::seconds(120));
}

}  // namespace

TEST_CASE("llama: checkpoints resume on other layouts, eval, sample and ckpt commands",
          "[llama][resume][eval][sample][integration]") {
  TempDir dir("llama-cli");
  const fs::path spec = dir / "job.yaml";
  write_text(spec, kJob);
  ProcResult t = train(dir.path(), spec, "ref");
  INFO(t.out << t.err);
  REQUIRE(t.exit_code == 0);
  const auto want = rows_of(dir / "ref");
  REQUIRE(want.size() == 6);
  const fs::path step3 = dir / "ref" / "checkpoints" / "step_00000003";

  // ckpt info names the family and its dimensions; verify passes.
  ProcResult info = run_trainctl({"ckpt", "info", (dir / "ref").string()}, dir.path());
  INFO(info.out << info.err);
  CHECK(info.exit_code == 0);
  CHECK_THAT(info.out, Catch::Contains("model: llama,") && Catch::Contains("n_kv_head 2") &&
                           Catch::Contains("ffn_hidden 64") && Catch::Contains("untied LM head"));
  CHECK(run_trainctl({"ckpt", "verify", (dir / "ref").string()}, dir.path()).exit_code == 0);

  // Resume the tp 2 x pp 2 checkpoint on one worker and on dp 2 x pp 2 with ZeRO-2.
  for (const auto& [name, layout] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"one", {"--set", "parallel.tp=1", "--set", "parallel.pp=1"}},
           {"dp2-pp2-zero2",
            {"--set", "parallel.dp=2", "--set", "parallel.tp=1", "--set", "parallel.zero=2"}}}) {
    std::vector<std::string> extra = {"--resume", step3.string()};
    extra.insert(extra.end(), layout.begin(), layout.end());
    const ProcResult r = train(dir.path(), spec, name, extra);
    INFO(name << "\n" << r.out << r.err);
    REQUIRE(r.exit_code == 0);
    const auto got = rows_of(dir / name);
    REQUIRE(got.size() == 3);  // steps 4-6
    for (const auto& [step, row] : got) {
      INFO(name << " step " << step);
      CHECK(row["loss"].get<double>() == Approx(want.at(step)["loss"].get<double>()).epsilon(2e-5));
    }
  }

  // eval on another layout gives the validation loss training logged at step 3.
  ProcResult ev =
      run_trainctl({"eval", spec.string(), "--set", "run_dir=" + (dir / "ref").string(), "--set",
                    "parallel.tp=1", "--set", "parallel.pp=1", "--from", step3.string()},
                   dir.path());
  INFO(ev.out << ev.err);
  REQUIRE(ev.exit_code == 0);
  std::smatch m;
  const std::string out = ev.out;
  REQUIRE(std::regex_search(out, m, std::regex("eval step 3: val_loss ([0-9.]+)")));
  CHECK(std::stod(m[1]) == Approx(want.at(3)["val_loss"].get<double>()).epsilon(2e-5));

  // sample: the KV-cache decoder with RoPE, fixed by the seed.
  auto sample = [&](const std::string& seed) {
    return run_trainctl({"sample", (dir / "ref").string(), "--prompt", "Hi", "--max-new-tokens",
                         "24", "--seed", seed},
                        dir.path());
  };
  const ProcResult a = sample("1");
  INFO(a.out << a.err);
  REQUIRE(a.exit_code == 0);
  CHECK(a.out.size() == 2 + 24 + 1);
  CHECK(sample("1").out == a.out);
  CHECK(sample("2").out != a.out);

  // A GPT job of the same dimensions does not take the Llama checkpoint.
  const fs::path gpt_spec = dir / "gpt.yaml";
  write_text(gpt_spec, std::regex_replace(kJob,
                                          std::regex("type: llama, |n_kv_head: 2, |"
                                                     " ffn_hidden: 64, rope_theta: 500000"),
                                          ""));
  ProcResult gpt = run_trainctl({"eval", gpt_spec.string(), "--set",
                                 "run_dir=" + (dir / "ref").string(), "--from", step3.string()},
                                dir.path());
  INFO(gpt.out << gpt.err);
  CHECK(gpt.exit_code == 2);
  CHECK_THAT(gpt.err, Catch::Contains("holds another model (llama,") &&
                          Catch::Contains("than " + gpt_spec.string() + " (gpt,"));
}
