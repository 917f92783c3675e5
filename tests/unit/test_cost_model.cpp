#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "plan/cluster_spec.h"
#include "plan/collective_cost.h"
#include "plan/cost_model.h"
#include "util/error.h"

using namespace trainctl;

namespace {

struct Row {
  double params_b;
  int heads, hidden, layers, tp, pp, gpus, batch;
  double tflops;
};

std::vector<Row> table1() {
  std::ifstream in(std::string(TRAINCTL_SOURCE_DIR) + "/tests/data/megatron_2021_table1.csv");
  REQUIRE(in);
  std::vector<Row> rows;
  std::string line;
  bool header = true;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (header) {
      header = false;
      continue;
    }
    for (char& c : line) c = c == ',' ? ' ' : c;
    std::istringstream fields(line);
    Row r{};
    fields >> r.params_b >> r.heads >> r.hidden >> r.layers >> r.tp >> r.pp >> r.gpus >> r.batch >>
        r.tflops;
    REQUIRE(fields);
    rows.push_back(r);
  }
  return rows;
}

plan::CostInputs inputs(const Row& r) {
  plan::CostInputs in;
  in.n_layer = r.layers;
  in.d_model = r.hidden;
  in.n_head = r.heads;
  in.seq_len = 2048;
  in.vocab_size = 51200;
  in.tp = r.tp;
  in.pp = r.pp;
  in.dp = r.gpus / (r.tp * r.pp);
  in.micro_batch_size = 1;
  in.global_batch_size = r.batch;
  in.recompute = "full";
  in.flash_attention = false;  // Megatron 2021 wrote the attention scores
  if (r.pp > 1) {
    in.virtual_stages = (r.layers / r.pp) % 2 == 0 ? 2 : 1;
    in.schedule = in.virtual_stages == 2 ? "interleaved" : "1f1b";
  }
  return in;
}

}  // namespace

TEST_CASE("cost model: ring collectives follow the alpha-beta formulas", "[cost_model]") {
  const plan::LinkTier link{"x", 10, 2};  // 10 GB/s, 2 us
  CHECK(plan::ring_allreduce_seconds(1e9, 1, link) == 0);
  CHECK(plan::ring_allreduce_seconds(1e9, 4, link) == Approx(6 * (2e-6 + 0.25e9 / 10e9)));
  CHECK(plan::ring_allgather_seconds(1e9, 4, link) == Approx(3 * (2e-6 + 0.25e9 / 10e9)));
  CHECK(plan::ring_reduce_scatter_seconds(1e9, 4, link) ==
        Approx(plan::ring_allgather_seconds(1e9, 4, link)));
  CHECK(plan::p2p_seconds(1e9, link) == Approx(2e-6 + 0.1));
}

TEST_CASE("cost model: the paper's FLOP formula equals the per-op count with recomputation",
          "[cost_model]") {
  const plan::ClusterSpec cluster =
      plan::load_cluster_spec(std::string(TRAINCTL_SOURCE_DIR) + "/configs/clusters/dgx-a100.yaml");
  for (const Row& r : table1()) {
    const plan::CostBreakdown c = plan::predict_step(inputs(r), cluster);
    const double paper =
        plan::megatron_flops_with_recompute(r.batch, 2048, r.layers, r.hidden, 51200);
    CHECK(c.hardware_flops == Approx(paper).epsilon(1e-9));
    const double parts = c.compute + c.recompute + c.tp_comm + c.pp_comm + c.dp_comm + c.bubble;
    CHECK(c.step_seconds == Approx(parts));
  }
}

TEST_CASE("cost model: Narayanan et al. 2021 Table 1 within 20% on dgx-a100.yaml", "[cost_model]") {
  const plan::ClusterSpec cluster =
      plan::load_cluster_spec(std::string(TRAINCTL_SOURCE_DIR) + "/configs/clusters/dgx-a100.yaml");
  const std::vector<Row> rows = table1();
  REQUIRE(rows.size() == 10);
  for (const Row& r : rows) {
    const plan::CostBreakdown c = plan::predict_step(inputs(r), cluster);
    INFO(r.params_b << "B: predicted " << c.tflops_per_gpu << " TFLOP/s per GPU, published "
                    << r.tflops);
    CHECK(std::abs(c.tflops_per_gpu - r.tflops) / r.tflops < 0.20);
  }
}

TEST_CASE("cost model: layout placement and where the time goes", "[cost_model]") {
  const plan::ClusterSpec cluster =
      plan::load_cluster_spec(std::string(TRAINCTL_SOURCE_DIR) + "/configs/clusters/dgx-a100.yaml");
  plan::CostInputs in = inputs(table1().back());
  const plan::CostBreakdown c = plan::predict_step(in, cluster);
  CHECK(c.tp_link == "nvlink");
  CHECK(c.pp_link == "infiniband-hdr");
  CHECK(c.dp_link == "infiniband-hdr");
  CHECK(c.nodes == 384);
  CHECK(c.recompute > 0);
  CHECK(c.bubble > 0);
  // No recomputation: less time and no recompute share; more micro-batches: less bubble.
  in.recompute = "none";
  const plan::CostBreakdown none = plan::predict_step(in, cluster);
  CHECK(none.recompute == 0);
  CHECK(none.step_seconds < c.step_seconds);
  CHECK(none.tp_comm < c.tp_comm);
  // A faster interconnect shrinks communication only.
  const plan::ClusterSpec h100 = plan::load_cluster_spec(std::string(TRAINCTL_SOURCE_DIR) +
                                                         "/configs/clusters/h100-superpod.yaml");
  const plan::CostBreakdown fast = plan::predict_step(in, h100);
  CHECK(fast.step_seconds < none.step_seconds);
  // A layout that needs more nodes than the cluster has is refused.
  plan::ClusterSpec small = cluster;
  small.nodes = 2;
  CHECK_THROWS_AS(plan::predict_step(in, small), InputError);
}

TEST_CASE("cluster file errors name file:line:col and the key", "[cost_model]") {
  const std::string good =
      "name: c\ndevice:\n  name: d\n  peak_tflops: 1\n  memory_bandwidth_gbs: 1\n"
      "  memory_gb: 1\nnode:\n  gpus: 1\nlinks: {}\n";
  CHECK(plan::parse_cluster_spec(good, "c.yaml").peak_tflops == 1);
  auto message = [](const std::string& text) {
    try {
      plan::parse_cluster_spec(text, "c.yaml");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string bad_number = message(
      "name: c\ndevice:\n  name: d\n  peak_tflops: fast\n  memory_bandwidth_gbs: 1\n"
      "  memory_gb: 1\nnode:\n  gpus: 1\nlinks: {}\n");
  CHECK_THAT(bad_number, Catch::Contains("c.yaml:4:") && Catch::Contains("device.peak_tflops"));
  const std::string unknown = message(good + "nodez: 3\n");
  CHECK_THAT(unknown, Catch::Contains("c.yaml:10:") && Catch::Contains("nodez"));
  const std::string missing = message("name: c\nnode:\n  gpus: 8\nlinks: {}\n");
  CHECK_THAT(missing, Catch::Contains("c.yaml") && Catch::Contains("device"));
  const std::string no_nvlink = message(
      "name: c\ndevice:\n  name: d\n  peak_tflops: 1\n  memory_bandwidth_gbs: 1\n"
      "  memory_gb: 1\nnode:\n  gpus: 8\nlinks: {}\n");
  CHECK_THAT(no_nvlink, Catch::Contains("links.intra_node"));
  CHECK_THAT(message("name: [\n"), Catch::Contains("c.yaml:") && Catch::Contains("invalid YAML"));
}
