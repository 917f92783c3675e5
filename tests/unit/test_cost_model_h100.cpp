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
#include "util/error.h"

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
    m.cp = cp;
    m.pp = pp;
    m.dp = gpus / (tp * cp * pp);
    m.micro_batch_size = 1;
    m.global_batch_size = static_cast<int>(tokens / seq);
    m.recompute = "none";
    m.schedule = "interleaved";
    m.virtual_stages = 2;
    const plan::CostBreakdown c = plan::predict_step(m, cluster);
    // Meta's TFLOP/s are its MFU times the BF16 peak: model FLOPs, no recomputation.
    const double model_tflops = c.mfu * cluster.peak_tflops;
    INFO(gpus << " GPUs, cp " << cp << ": predicted " << model_tflops
              << " model TFLOP/s per GPU, published " << tflops);
    CHECK(std::abs(model_tflops - tflops) / tflops < 0.20);
    ++rows;
  }
  CHECK(rows == 3);
}

TEST_CASE("cost model: uneven stages (Llama 3 405B, 126 layers on 16 stages)",
          "[cost_model][uneven]") {
  const plan::ClusterSpec cluster = plan::load_cluster_spec(std::string(TRAINCTL_SOURCE_DIR) +
                                                            "/configs/clusters/h100-superpod.yaml");
  plan::CostInputs m;
  m.n_layer = 126;
  m.d_model = 16384;
  m.n_head = 128;
  m.seq_len = 8192;
  m.vocab_size = 128256;
  m.layer_matrix_params = (128 + 2 * 8) * 128.0 * 16384 + 16384.0 * 16384 + 3 * 53248.0 * 16384;
  m.tp = 8;
  m.pp = 16;
  m.dp = 8;
  m.global_batch_size = 128;
  // Meta's split: the first and last stages one layer short (they hold the embedding and
  // the LM head).
  m.stage_layers = std::vector<int>(16, 8);
  m.stage_layers.front() = m.stage_layers.back() = 7;
  const plan::CostBreakdown c = plan::predict_step(m, cluster);
  REQUIRE(c.stage_layers == m.stage_layers);
  REQUIRE(c.stage_seconds.size() == 16);
  // A middle stage's 8 layers are slower than 7 layers and the head (~0.65 of a layer).
  CHECK(c.stage_seconds[1] > c.stage_seconds[15]);
  CHECK(c.stage_seconds[15] > c.stage_seconds[0]);
  CHECK(c.stage_seconds[1] == c.stage_seconds[8]);
  CHECK(c.step_seconds > 0);
  // Moving a layer onto the head's stage makes it the slowest, and the step slower.
  plan::CostInputs worse = m;
  worse.stage_layers[14] = 7;
  worse.stage_layers[15] = 8;
  const plan::CostBreakdown w = plan::predict_step(worse, cluster);
  CHECK(w.stage_seconds[15] > c.stage_seconds[1]);
  CHECK(w.step_seconds > c.step_seconds);
  // Interleaved with 2 chunks: 32 virtual stages, each pipeline stage's chunks add up.
  plan::CostInputs chunks = m;
  chunks.schedule = "interleaved";
  chunks.virtual_stages = 2;
  chunks.stage_layers = std::vector<int>(32, 4);
  chunks.stage_layers.front() = chunks.stage_layers.back() = 3;
  const plan::CostBreakdown v = plan::predict_step(chunks, cluster);
  CHECK(v.stage_layers == m.stage_layers);
  // Counts that do not cover the model, or leave a stage empty, are refused.
  plan::CostInputs bad = m;
  bad.stage_layers[3] = 9;
  CHECK_THROWS_AS(plan::predict_step(bad, cluster), InputError);
  bad.stage_layers = std::vector<int>(15, 8);
  bad.stage_layers.push_back(6);
  bad.stage_layers[0] = 0;
  bad.stage_layers[1] = 8 + 8 + 0;  // still 126 in all, but stage 0 has none
  CHECK_THROWS_AS(plan::predict_step(bad, cluster), InputError);
}
