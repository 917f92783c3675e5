// Context parallelism in the cost model (plan/cost_model.h): each rank's compute falls
// by about 1/cp, the ring's K/V traffic is counted on the link the CP group spans and is
// mostly hidden behind ring attention's compute at long sequences, and a 131,072-token
// Llama 3 70B-class layout with cp 16 on H100 nodes is evaluated.
#include <catch2/catch.hpp>
#include <string>

#include "plan/cluster_spec.h"
#include "plan/cost_model.h"

using namespace trainctl;

namespace {

plan::ClusterSpec h100() {
  return plan::load_cluster_spec(std::string(TRAINCTL_SOURCE_DIR) +
                                 "/configs/clusters/h100-superpod.yaml");
}

// Llama 3 70B's shape (80 layers, d_model 8192, 64 heads, 8 k/v heads).
plan::CostInputs llama70b(int seq, int cp) {
  plan::CostInputs in;
  in.n_layer = 80;
  in.d_model = 8192;
  in.n_head = 64;
  in.kv_fraction = 8.0 / 64;
  in.layer_matrix_params = (64 + 2.0 * 8) * 128 * 8192 + 8192.0 * 8192 + 3.0 * 28672 * 8192;
  in.seq_len = seq;
  in.vocab_size = 128256;
  in.tp = 8;
  in.pp = 4;
  in.cp = cp;
  in.dp = 1;
  in.micro_batch_size = 1;
  in.global_batch_size = 16;
  in.recompute = "full";
  return in;
}

}  // namespace

TEST_CASE("cost model: cp splits each rank's work and counts the ring", "[cost_model][cp]") {
  const plan::ClusterSpec cluster = h100();
  const plan::CostBreakdown one = plan::predict_step(llama70b(16384, 1), cluster);
  const plan::CostBreakdown two = plan::predict_step(llama70b(16384, 2), cluster);
  CHECK(one.cp_comm_total == 0);
  CHECK(one.cp_link == "-");
  // Half the tokens per rank: about half the compute, the same global throughput or better.
  CHECK(two.compute == Approx(one.compute / 2).epsilon(0.05));
  CHECK(two.cp_comm_total > 0);
  CHECK(two.cp_comm <= two.cp_comm_total);
  CHECK(two.cp_link == "infiniband-ndr");  // tp 8 x cp 2: 16 ranks, two nodes of 8
}

TEST_CASE("cost model: a 131,072-token layout with cp 16 is evaluated", "[cost_model][cp]") {
  const plan::ClusterSpec cluster = h100();
  const plan::CostInputs in = llama70b(131072, 16);
  const plan::CostBreakdown c = plan::predict_step(in, cluster);
  CHECK(c.nodes == 8 * 16 * 4 / 8);
  CHECK(c.cp_link == "infiniband-ndr");  // tp 8 x cp 16 ranks span 16 nodes
  CHECK(c.cp_comm_total > 0);
  // Long sequences: each block step's attention outlasts a hop; most traffic is hidden.
  CHECK(c.cp_comm < 0.2 * c.cp_comm_total);
  CHECK(c.step_seconds > 0);
  CHECK(c.mfu > 0.1);
  CHECK(c.mfu < 1.0);
  CHECK_THAT(plan::format_cost(in, cluster, c),
             Catch::Contains("cp 16 on infiniband-ndr") && Catch::Contains("cp communication"));
}
