// The cost model on configs/clusters/h100-superpod.yaml against a published H100 run:
// Llama 3 405B pre-training (Meta, arXiv:2407.21783 Table 4; tests/data/llama3_2024_h100.csv),
// as tests/unit/test_cost_model.cpp checks dgx-a100.yaml against Narayanan et al. 2021.
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "plan/cluster_spec.h"
#include "plan/cost_model.h"

using namespace trainctl;

TEST_CASE("cost model: Llama 3 405B on H100 (Meta 2024, Table 4) within 20% on h100-superpod",
          "[cost_model]") {
  const plan::ClusterSpec cluster = plan::load_cluster_spec(std::string(TRAINCTL_SOURCE_DIR) +
                                                            "/configs/clusters/h100-superpod.yaml");
  std::ifstream in(std::string(TRAINCTL_SOURCE_DIR) + "/tests/data/llama3_2024_h100.csv");
  REQUIRE(in);
  int rows = 0;
  bool header = true;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    if (header) {
      header = false;
      continue;
    }
    for (char& c : line) c = c == ',' ? ' ' : c;
    std::istringstream f(line);
    int gpus = 0, tp = 0, cp = 0, pp = 0, seq = 0;
    double tokens = 0, tflops = 0;
    f >> gpus >> tp >> cp >> pp >> seq >> tokens >> tflops;
    REQUIRE(f);
    REQUIRE(cp == 1);  // the cost model has no context parallelism
    // Llama 3 405B: 126 layers, d 16384, 128 heads (8 k/v heads of 128), FFN 53248.
    plan::CostInputs m;
    m.n_layer = 126;
    m.d_model = 16384;
    m.n_head = 128;
    m.seq_len = seq;
    m.vocab_size = 128256;
    const double head_dim = 128, kv_heads = 8, ffn = 53248;
    m.layer_matrix_params = (m.n_head + 2 * kv_heads) * head_dim * m.d_model +
                            1.0 * m.d_model * m.d_model + 3 * ffn * m.d_model;
    m.tp = tp;
    m.pp = pp;
    m.dp = gpus / (tp * pp);
    m.micro_batch_size = 1;
    m.global_batch_size = static_cast<int>(tokens / seq);
    m.recompute = "none";
    m.schedule = "interleaved";
    m.virtual_stages = 2;
    const plan::CostBreakdown c = plan::predict_step(m, cluster);
    // Meta's TFLOP/s are its MFU times the BF16 peak: model FLOPs, no recomputation.
    const double model_tflops = c.mfu * cluster.peak_tflops;
    INFO(gpus << " GPUs: predicted " << model_tflops << " model TFLOP/s per GPU, published "
              << tflops);
    CHECK(std::abs(model_tflops - tflops) / tflops < 0.20);
    ++rows;
  }
  CHECK(rows == 2);
}
