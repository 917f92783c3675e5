#pragma once
// A small GPT job (vocab 64, seq_len 16, 2 layers, d_model 32, synthetic data) trained
// through the real binary, and the metrics.jsonl rows it wrote. Shared by the precision
// tests (fp16 loss scaling, the mixed-precision layout).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "integration/helpers.h"

namespace trainctl::test {

struct SmallRun {
  std::string parallel;   // the parallel: section, e.g. "{dp: 2, zero: 1}"
  std::string precision;  // the precision: section, e.g. "{compute: bf16}"
  std::string training = "steps: 16, micro_batch_size: 2, global_batch_size: 8";
  std::string checkpoint = "{every_steps: 8}";
};

// Without `extra` the run starts over (--resume none); `extra` (e.g. --resume DIR) replaces
// that.
inline std::vector<nlohmann::json> train_small(const fs::path& dir, const std::string& name,
                                               const SmallRun& run,
                                               std::vector<std::string> extra = {}) {
  const fs::path job = dir / (name + ".yaml");
  write_text(job, "name: " + name +
                      "\nseed: 5\n"
                      "model: {vocab_size: 64, seq_len: 16, n_layer: 2, n_head: 4, d_model: 32}\n"
                      "data: {type: synthetic}\n"
                      "parallel: " +
                      run.parallel + "\nprecision: " + run.precision + "\ntraining: {" +
                      run.training +
                      "}\n"
                      "optimizer: {lr: 1.0e-2, warmup_steps: 1, min_lr: 1.0e-3}\n"
                      "checkpoint: " +
                      run.checkpoint +
                      "\n"
                      "logging: {every_steps: 1}\n"
                      "runtime: {comm_timeout_s: 60}\n");
  std::vector<std::string> args = {"train", job.string(), "--resume", "none"};
  if (!extra.empty()) args = {"train", job.string()};
  args.insert(args.end(), extra.begin(), extra.end());
  const ProcResult r = run_trainctl(args, dir, std::chrono::seconds(120));
  INFO(name << "\n" << r.out << r.err);
  REQUIRE(r.exit_code == 0);
  std::vector<nlohmann::json> rows;
  std::istringstream in(read_text(dir / "runs" / name / "metrics.jsonl"));
  for (std::string line; std::getline(in, line);) rows.push_back(nlohmann::json::parse(line));
  return rows;
}

}  // namespace trainctl::test
