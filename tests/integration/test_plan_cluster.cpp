// `trainctl plan --cluster`: the cost model's prediction on a cluster file, and a malformed
// cluster file refused with file:line:col and the key.
#include <catch2/catch.hpp>

#include "integration/helpers.h"

using namespace trainctl::test;

TEST_CASE("plan --cluster predicts the step on a shipped cluster", "[plan][integration]") {
  TempDir dir("plan_cluster");
  const fs::path job = dir / "job.yaml";
  write_text(job,
             "name: big\nmodel: {n_layer: 8, n_head: 16, d_model: 2048, seq_len: 2048, "
             "vocab_size: 51200}\nparallel: {dp: 4, tp: 8, pp: 2}\n"
             "training: {micro_batch_size: 1, global_batch_size: 64, "
             "activation_checkpointing: full}\n");
  const std::string cluster = std::string(TRAINCTL_SOURCE_DIR) + "/configs/clusters/dgx-a100.yaml";
  ProcResult r = run_trainctl({"plan", job.string(), "--cluster", cluster}, dir.path());
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("cluster dgx-a100: 64 x A100-SXM4-80GB on 8 nodes (tp on "
                                    "nvlink, pp on infiniband-hdr, dp on infiniband-hdr)"));
  CHECK_THAT(r.out, Catch::Contains("predicted step "));
  CHECK_THAT(r.out, Catch::Contains("  recomputation "));
  CHECK_THAT(r.out, Catch::Contains("  pipeline bubble "));
  CHECK_THAT(r.out, Catch::Contains("of the device's 85.9 GB"));

  ProcResult j = run_trainctl({"plan", job.string(), "--cluster", cluster, "--json"}, dir.path());
  REQUIRE(j.exit_code == 0);
  CHECK_THAT(j.out, Catch::Contains("\"cost\": {") && Catch::Contains("\"tp_link\":\"nvlink\""));
}

TEST_CASE("plan --cluster refuses a malformed cluster file with file:line:key",
          "[plan][integration]") {
  TempDir dir("plan_cluster_bad");
  const fs::path job = dir / "job.yaml";
  write_text(job, "name: small\n");
  const fs::path cluster = dir / "c.yaml";
  write_text(cluster,
             "name: c\ndevice:\n  name: d\n  peak_tflops: 1\n  memory_bandwidth_gbs: 1\n"
             "  memory_gb: 1\nnode:\n  gpus: 8\nlinks:\n  intra_node: {bandwidth_gbs: -3, "
             "latency_us: 1}\n");
  ProcResult r = run_trainctl({"plan", job.string(), "--cluster", cluster.string()}, dir.path());
  INFO(r.out << r.err);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err,
             Catch::Contains("c.yaml:10:") && Catch::Contains("links.intra_node.bandwidth_gbs"));
}
