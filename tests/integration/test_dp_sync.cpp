// parallel.dp_sync through the real binary: exact equivalences that must hold (local SGD
// with sync_every 1 and plain SGD is synchronous data parallelism; DiLoCo with outer_lr 1 and
// no momentum is local SGD), resume in the middle of a synchronisation period is bitwise the
// uninterrupted run (each replica's own parameters and optimizer state and DiLoCo's outer
// state come back from the checkpoint), tp/pp compose, and comm_bytes shows the saving.
#include <catch2/catch.hpp>
#include <cmath>
#include <nlohmann/json.hpp>

#include "integration/helpers.h"

using namespace trainctl::test;
using nlohmann::json;

namespace {

std::vector<json> rows_of(const fs::path& run) {
  std::vector<json> out;
  std::istringstream in(read_text(run / "metrics.jsonl"));
  for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
  return out;
}

fs::path job(const fs::path& dir, const std::string& parallel, const std::string& optimizer) {
  const fs::path file = dir / "job.yaml";
  write_text(file,
             "name: dpsync\nseed: 5\n"
             "model: {vocab_size: 64, seq_len: 16, n_layer: 2, n_head: 4, d_model: 32}\n"
             "data: {type: synthetic}\n"
             "parallel: " +
                 parallel +
                 "\n"
                 "training: {steps: 12, micro_batch_size: 2, global_batch_size: 8, "
                 "grad_clip: 0}\n"
                 "optimizer: " +
                 optimizer +
                 "\n"
                 "checkpoint: {every_steps: 6, async: false}\n"
                 "logging: {every_steps: 1, tensorboard: false}\n"
                 "runtime: {comm_timeout_s: 60, comm_selftest: false}\n");
  return file;
}

ProcResult train(const fs::path& dir, const fs::path& spec, const std::string& run,
                 std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"train", spec.string(), "--set", "run_dir=" + run};
  args.insert(args.end(), extra.begin(), extra.end());
  Proc p(args, dir);
  return p.wait(std::chrono::seconds(120));
}

const std::string kSgd =
    "{type: sgd, lr: 0.5, betas: [0.9, 0.95], weight_decay: 0.01, decay: constant}";
const std::string kAdamw = "{type: adamw, lr: 1.0e-2, warmup_steps: 2, min_lr: 1.0e-3}";

void require_same_losses(const fs::path& a, const fs::path& b, double tol) {
  const std::vector<json> ra = rows_of(a), rb = rows_of(b);
  REQUIRE(ra.size() == 12);
  REQUIRE(rb.size() == ra.size());
  for (size_t i = 0; i < ra.size(); ++i) {
    INFO("step " << ra[i]["step"]);
    CHECK(std::abs(ra[i]["loss"].get<double>() - rb[i]["loss"].get<double>()) <= tol);
  }
}

}  // namespace

TEST_CASE("local SGD with sync_every 1 and plain SGD is synchronous data parallelism",
          "[dp_sync]") {
  TempDir dir("dpsync-eq");
  const fs::path sync = job(dir.path(), "{dp: 2}", kSgd);
  REQUIRE(train(dir.path(), sync, "allreduce").exit_code == 0);
  const ProcResult local =
      train(dir.path(), sync, "local",
            {"--set", "parallel.dp_sync=local_sgd", "--set", "parallel.sync_every=1"});
  INFO(local.out << local.err);
  REQUIRE(local.exit_code == 0);
  // Momentum and weight decay are linear: only float rounding differs.
  require_same_losses(dir / "allreduce", dir / "local", 1e-5);
  // Without synchronising, the replicas' SGD would drift apart: sync_every 4 differs.
  REQUIRE(train(dir.path(), sync, "local4",
                {"--set", "parallel.dp_sync=local_sgd", "--set", "parallel.sync_every=4"})
              .exit_code == 0);
  const std::vector<json> a = rows_of(dir / "allreduce"), l4 = rows_of(dir / "local4");
  CHECK(std::abs(a.back()["loss"].get<double>() - l4.back()["loss"].get<double>()) > 1e-5);
}

TEST_CASE("DiLoCo with outer_lr 1 and no momentum is local SGD", "[dp_sync]") {
  TempDir dir("dpsync-diloco");
  const fs::path spec = job(dir.path(), "{dp: 2, dp_sync: local_sgd, sync_every: 3}", kAdamw);
  REQUIRE(train(dir.path(), spec, "local").exit_code == 0);
  const ProcResult d = train(dir.path(), spec, "diloco",
                             {"--set", "parallel.dp_sync=diloco", "--set", "parallel.outer_lr=1",
                              "--set", "parallel.outer_momentum=0"});
  INFO(d.out << d.err);
  REQUIRE(d.exit_code == 0);
  require_same_losses(dir / "local", dir / "diloco", 1e-5);
}

TEST_CASE(
    "DiLoCo's outer step starts from the initialised weights: H 1, outer_lr 1/2 is SGD at "
    "half the rate",
    "[dp_sync]") {
  // Plain SGD (no momentum, no weight decay): one inner step then an outer step of 1/2 with
  // no outer momentum moves the weights by half the averaged inner step, as allreduce with
  // half the learning rate does. An outer state taken before the weights were initialised
  // (zeros) fails this from the first meeting on.
  TempDir dir("dpsync-diloco-start");
  const std::string sgd =
      "{type: sgd, lr: 0.4, betas: [0, 0.95], weight_decay: 0, decay: constant, warmup_steps: 0}";
  const fs::path spec = job(dir.path(),
                            "{dp: 2, dp_sync: diloco, sync_every: 1, outer_lr: 0.5, "
                            "outer_momentum: 0}",
                            sgd);
  const ProcResult d = train(dir.path(), spec, "diloco");
  INFO(d.out << d.err);
  REQUIRE(d.exit_code == 0);
  fs::create_directories(dir / "sync");
  const std::string half =
      "{type: sgd, lr: 0.2, betas: [0, 0.95], weight_decay: 0, decay: constant, warmup_steps: 0}";
  const ProcResult a = train(dir.path(), job(dir / "sync", "{dp: 2}", half), "allreduce");
  INFO(a.out << a.err);
  REQUIRE(a.exit_code == 0);
  require_same_losses(dir / "allreduce", dir / "diloco", 1e-5);
}

TEST_CASE("resume in the middle of a sync period is bitwise the uninterrupted run",
          "[dp_sync][resume]") {
  TempDir dir("dpsync-resume");
  for (const std::string parallel : {"{dp: 2, dp_sync: local_sgd, sync_every: 4}",
                                     "{dp: 2, tp: 2, dp_sync: diloco, sync_every: 4}",
                                     "{dp: 2, pp: 2, dp_sync: diloco, sync_every: 4}"}) {
    INFO(parallel);
    const fs::path spec = job(dir.path(), parallel, kAdamw);
    fs::remove_all(dir / "straight");
    fs::remove_all(dir / "resumed");
    const ProcResult straight = train(dir.path(), spec, "straight");
    INFO(straight.out << straight.err);
    REQUIRE(straight.exit_code == 0);
    // Step 6 lies inside the period 4..8: the replicas differ there.
    const ProcResult resumed =
        train(dir.path(), spec, "resumed",
              {"--resume", (dir / "straight" / "checkpoints" / "step_00000006").string()});
    INFO(resumed.out << resumed.err);
    REQUIRE(resumed.exit_code == 0);
    CHECK(read_text(dir / "straight" / "model.safetensors") ==
          read_text(dir / "resumed" / "model.safetensors"));
    const std::vector<json> a = rows_of(dir / "straight"), b = rows_of(dir / "resumed");
    REQUIRE(b.size() == 6);
    for (size_t i = 0; i < b.size(); ++i) CHECK(a[i + 6]["loss"] == b[i]["loss"]);
  }
}

TEST_CASE("comm_bytes: every step with allreduce, every sync_every-th with local SGD",
          "[dp_sync]") {
  TempDir dir("dpsync-bytes");
  const fs::path spec = job(dir.path(), "{dp: 2}", kAdamw);
  REQUIRE(train(dir.path(), spec, "allreduce").exit_code == 0);
  REQUIRE(train(dir.path(), spec, "local",
                {"--set", "parallel.dp_sync=local_sgd", "--set", "parallel.sync_every=4"})
              .exit_code == 0);
  const std::vector<json> a = rows_of(dir / "allreduce"), l = rows_of(dir / "local");
  REQUIRE(a.size() == 12);
  const int64_t per_step = a[0]["comm_bytes"].get<int64_t>();
  CHECK(per_step > 0);
  int64_t local_total = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i]["comm_bytes"].get<int64_t>() == per_step);
    const int64_t b = l[i]["comm_bytes"].get<int64_t>();
    CHECK(b == ((i + 1) % 4 == 0 ? per_step : 0));  // the parameters are the gradient's size
    local_total += b;
  }
  CHECK(local_total * 4 == per_step * 12);
}

TEST_CASE("comm_bytes under ZeRO-3: gathers and reduce-scatters cost at least 1.5x allreduce",
          "[dp_sync][zero3]") {
  // FSDP's volume: the parameters gathered before the forward and again before the
  // backward, the gradients reduce-scattered (0.5 + 0.5 + 0.5 of an allreduce's bytes).
  TempDir dir("dpsync-bytes-zero3");
  const fs::path spec = job(dir.path(), "{dp: 2}", kAdamw);
  REQUIRE(train(dir.path(), spec, "allreduce").exit_code == 0);
  const ProcResult z = train(dir.path(), spec, "zero3", {"--set", "parallel.zero=3"});
  INFO(z.out << z.err);
  REQUIRE(z.exit_code == 0);
  const std::vector<json> a = rows_of(dir / "allreduce"), r = rows_of(dir / "zero3");
  REQUIRE(r.size() == a.size());
  const int64_t per_step = a[0]["comm_bytes"].get<int64_t>();
  for (const json& row : r) CHECK(row["comm_bytes"].get<int64_t>() * 2 >= per_step * 3);
}

TEST_CASE("PowerSGD trains with tp and pp, sends less, and resumes bitwise",
          "[dp_sync][powersgd][resume]") {
  TempDir dir("dpsync-powersgd");
  const fs::path dense = job(dir.path(), "{dp: 2}", kAdamw);
  REQUIRE(train(dir.path(), dense, "allreduce").exit_code == 0);
  const int64_t dense_bytes = rows_of(dir / "allreduce")[0]["comm_bytes"].get<int64_t>();
  for (const std::string parallel :
       {"{dp: 2, grad_compression: powersgd, powersgd_rank: 2}",
        "{dp: 2, tp: 2, grad_compression: powersgd, powersgd_rank: 2}",
        "{dp: 2, pp: 2, zero: 1, grad_compression: powersgd, powersgd_rank: 2}",
        // Checkpoint at step 6: inside the warm-up (error feedback and Q still initial), and
        // after it.
        "{dp: 2, grad_compression: powersgd, powersgd_rank: 2, powersgd_warmup_steps: 8}",
        "{dp: 2, grad_compression: powersgd, powersgd_rank: 2, powersgd_warmup_steps: 4}"}) {
    INFO(parallel);
    const fs::path spec = job(dir.path(), parallel, kAdamw);
    fs::remove_all(dir / "straight");
    fs::remove_all(dir / "resumed");
    const ProcResult straight = train(dir.path(), spec, "straight");
    INFO(straight.out << straight.err);
    REQUIRE(straight.exit_code == 0);
    const std::vector<json> a = rows_of(dir / "straight");
    CHECK(a.back()["loss"].get<double>() < a.front()["loss"].get<double>());  // it learns
    CHECK(a.back()["comm_bytes"].get<int64_t>() * 2 < dense_bytes);
    // The error feedback and Q of step 6 come back: the rest of the run is the same.
    const ProcResult resumed =
        train(dir.path(), spec, "resumed",
              {"--resume", (dir / "straight" / "checkpoints" / "step_00000006").string()});
    INFO(resumed.out << resumed.err);
    REQUIRE(resumed.exit_code == 0);
    CHECK(read_text(dir / "straight" / "model.safetensors") ==
          read_text(dir / "resumed" / "model.safetensors"));
  }
}

TEST_CASE("PowerSGD warm-up: uncompressed allreduce first, then compression",
          "[dp_sync][powersgd]") {
  TempDir dir("dpsync-powersgd-warmup");
  REQUIRE(train(dir.path(), job(dir.path(), "{dp: 2}", kAdamw), "allreduce").exit_code == 0);
  const fs::path spec = job(
      dir.path(), "{dp: 2, grad_compression: powersgd, powersgd_rank: 2, powersgd_warmup_steps: 4}",
      kAdamw);
  const ProcResult warm = train(dir.path(), spec, "warm");
  INFO(warm.out << warm.err);
  REQUIRE(warm.exit_code == 0);
  const std::vector<json> a = rows_of(dir / "allreduce"), w = rows_of(dir / "warm");
  REQUIRE(a.size() == 12);
  REQUIRE(w.size() == a.size());
  const int64_t dense_bytes = a[0]["comm_bytes"].get<int64_t>();
  for (size_t i = 0; i < w.size(); ++i) {
    INFO("step " << w[i]["step"]);
    if (i < 4) {
      // Steps 1-4 are synchronous allreduce to the bit; step 5's loss is computed before
      // its own (first compressed) update.
      CHECK(w[i]["comm_bytes"].get<int64_t>() == dense_bytes);
      CHECK(w[i]["grad_norm"] == a[i]["grad_norm"]);
    } else {
      CHECK(w[i]["comm_bytes"].get<int64_t>() * 2 < dense_bytes);
    }
    if (i <= 4) CHECK(w[i]["loss"] == a[i]["loss"]);
  }
  CHECK(w[5]["loss"] != a[5]["loss"]);
  // Without the warm-up the first step is already compressed.
  const ProcResult cold =
      train(dir.path(), spec, "cold", {"--set", "parallel.powersgd_warmup_steps=0"});
  REQUIRE(cold.exit_code == 0);
  CHECK(rows_of(dir / "cold")[0]["comm_bytes"].get<int64_t>() * 2 < dense_bytes);
  CHECK(rows_of(dir / "cold")[1]["loss"] != a[1]["loss"]);
}

TEST_CASE("grad_compression: bf16 is grad_comm: bf16", "[dp_sync]") {
  TempDir dir("dpsync-bf16");
  const fs::path spec = job(dir.path(), "{dp: 2, grad_compression: bf16}", kAdamw);
  REQUIRE(train(dir.path(), spec, "new").exit_code == 0);
  const fs::path old = job(dir.path(), "{dp: 2, grad_comm: bf16}", kAdamw);
  REQUIRE(train(dir.path(), old, "old").exit_code == 0);
  CHECK(read_text(dir / "new" / "model.safetensors") ==
        read_text(dir / "old" / "model.safetensors"));
  // bf16 halves the bytes of fp32's ring allreduce at dp 2.
  REQUIRE(train(dir.path(), job(dir.path(), "{dp: 2}", kAdamw), "fp32").exit_code == 0);
  CHECK(rows_of(dir / "new")[0]["comm_bytes"].get<int64_t>() * 2 ==
        rows_of(dir / "fp32")[0]["comm_bytes"].get<int64_t>());
}
