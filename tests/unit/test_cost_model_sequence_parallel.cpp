// The cost model with parallel.sequence_parallel (plan/cost_model.h): the same TP bytes on
// the wire as the allreduces it replaces (ring reduce-scatter + all-gather), less
// elementwise traffic, no all-gather after pipeline sends.
#include <catch2/catch.hpp>
#include <string>

#include "plan/cluster_spec.h"
#include "plan/collective_cost.h"
#include "plan/cost_model.h"

using namespace trainctl;

namespace {

plan::CostInputs gpt_175b_like() {
  plan::CostInputs in;
  in.n_layer = 96;
  in.d_model = 12288;
  in.n_head = 96;
  in.seq_len = 2048;
  in.vocab_size = 51200;
  in.tp = 8;
  in.pp = 8;
  in.dp = 2;
  in.micro_batch_size = 1;
  in.global_batch_size = 64;
  return in;
}

}  // namespace

TEST_CASE("cost model: sequence parallelism sends the allreduce's bytes, splits the rest",
          "[cost_model][sequence_parallel]") {
  const plan::ClusterSpec cluster =
      plan::load_cluster_spec(std::string(TRAINCTL_SOURCE_DIR) + "/configs/clusters/dgx-a100.yaml");
  for (const std::string recompute : {"none", "full"}) {
    INFO(recompute);
    plan::CostInputs in = gpt_175b_like();
    in.recompute = recompute;
    const plan::CostBreakdown tp = plan::predict_step(in, cluster);
    in.sequence_parallel = true;
    const plan::CostBreakdown sp = plan::predict_step(in, cluster);
    // Bytes: 4 (6 with full recomputation) allreduces of b s h 2 bytes per layer and
    // micro-batch, each 2 (t-1)/t of it per rank; reduce-scatter + all-gather the same.
    const double m = 64.0 / 2, layers = 96.0 / 8, message = 2048.0 * 12288 * 2;
    const double calls = recompute == "full" ? 6 : 4;
    CHECK(tp.tp_bytes == Approx(m * layers * calls * 2 * 7.0 / 8 * message));
    CHECK(sp.tp_bytes == Approx(tp.tp_bytes));
    // Time on the wire: a ring allreduce is a reduce-scatter then an all-gather.
    CHECK(sp.tp_comm == Approx(tp.tp_comm));
    // Norms and residuals on 1/t of the tokens; no all-gather after a pipeline send.
    CHECK(sp.compute < tp.compute);
    CHECK(sp.pp_comm < tp.pp_comm);
    CHECK(sp.step_seconds < tp.step_seconds);
  }
  // trainctl's selective recomputation refills the two norm outputs with all-gathers.
  plan::CostInputs in = gpt_175b_like();
  in.recompute = "selective";
  in.sequence_parallel = true;
  const plan::CostBreakdown sel = plan::predict_step(in, cluster);
  const double per_layer_micro = sel.tp_bytes / (32 * 12);
  CHECK(per_layer_micro == Approx((8 + 2) * 7.0 / 8 * 2048.0 * 12288 * 2));
  CHECK(plan::cost_json(sel).find("\"tp_bytes\"") != std::string::npos);
  CHECK(plan::format_cost(in,
                          plan::load_cluster_spec(std::string(TRAINCTL_SOURCE_DIR) +
                                                  "/configs/clusters/dgx-a100.yaml"),
                          sel)
            .find("sequence parallel reduce-scatter + all-gather") != std::string::npos);
}
