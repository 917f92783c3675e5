// model.moe in the job spec: read, refused with file:line and a fix when it cannot run,
// dumped so that it reads back, and summarised with total and active parameters.
#include "test_config_helpers.h"

using trainctl::config::JobSpec;
using trainctl::config::parse_job_spec;
using trainctl::config::testing::require_error;

TEST_CASE("config: model.moe is read and round-trips", "[config][moe]") {
  const JobSpec s = parse_job_spec(R"(name: m
model:
  type: llama
  n_layer: 6
  moe: {num_experts: 8, top_k: 2, expert_ffn_hidden: 64, shared_experts: 1, score: sigmoid,
        balance: none, capacity_factor: 1.25, layers: from_2}
)",
                                   "job.yaml", "/tmp");
  const auto& e = s.model.moe;
  CHECK(e.num_experts == 8);
  CHECK(e.score == "sigmoid");
  CHECK(e.capacity_factor == 1.25);
  CHECK((s.model.moe_layer(1) == false && s.model.moe_layer(2) && s.model.moe_layer(5)));
  const JobSpec every = parse_job_spec(
      "model: {n_layer: 6, moe: {num_experts: 4, layers: every_3}}", "job.yaml", "/tmp");
  CHECK(every.model.expert_hidden() == every.model.mlp_hidden());  // unset: the dense width
  for (int l = 0; l < 6; ++l) CHECK(every.model.moe_layer(l) == (l == 2 || l == 5));
  for (const JobSpec* spec : {&s, &every}) {
    const std::string text = trainctl::config::to_yaml(*spec);
    INFO(text);
    CHECK(parse_job_spec(text, "config.resolved.yaml", "/tmp") == *spec);
  }
  // balance: bias is built: accepted (parse_job_spec validates), with its update rate.
  const JobSpec bias = parse_job_spec(
      "model: {moe: {num_experts: 4, balance: bias, bias_update_rate: 0.01}}", "job.yaml", "/tmp");
  CHECK(bias.model.moe.balance == "bias");
  CHECK(bias.model.moe.bias_update_rate == 0.01);
  // Without model.moe the dump has none (a dense model reads back dense).
  CHECK(trainctl::config::to_yaml(parse_job_spec("name: d\n", "job.yaml", "/tmp")).find("moe") ==
        std::string::npos);
}

TEST_CASE("config: model.moe that cannot run is refused at validate", "[config][moe]") {
  require_error(R"(model:
  moe: {num_experts: 4, top_k: 6}
)",
                "job.yaml:2:", "model.moe.top_k", {"at most model.moe.num_experts (4)"});
  require_error(R"(model:
  moe: {num_experts: 4, capacity_factor: -1}
)",
                "job.yaml:2:", "model.moe.capacity_factor", {});
  require_error(R"(model:
  n_layer: 2
  moe: {num_experts: 4, layers: every_3}
)",
                "job.yaml:3:", "model.moe.layers", {"selects none", "2 layers"});
  require_error(R"(model:
  moe: {num_experts: 4, layers: some}
)",
                "job.yaml:2:", "model.moe.layers", {"all, every_N", "from_K"});
  require_error(R"(model:
  moe: {num_experts: 4, balance: bias}
parallel: {dp: 2, mode: parameter_server}
training: {micro_batch_size: 2, global_batch_size: 4}
)",
                "job.yaml:2:", "model.moe.balance", {"parameter-server", "aux_loss or none"});
  require_error(R"(device: cuda
model:
  moe: {num_experts: 4}
)",
                "job.yaml:3:", "model.moe", {"CPU backend only", "device: cpu"});
  require_error(R"(model:
  moe: {top_k: 1}
)",
                "job.yaml:2:", "model.moe.top_k", {"needs model.moe.num_experts"});
  require_error(R"(model:
  moe: {num_experts: 4, expert_ffn_hidden: 30}
parallel: {tp: 4}
)",
                "job.yaml:3:", "parallel.tp", {"model.moe.expert_ffn_hidden (30)"});
}

TEST_CASE("config: the summary prints total and active parameters", "[config][moe]") {
  const JobSpec dense = parse_job_spec("model: {n_layer: 2, d_model: 64}\n", "job.yaml", "/tmp");
  const JobSpec moe = parse_job_spec(
      "model: {n_layer: 2, d_model: 64, moe: {num_experts: 4, top_k: 1}}\n", "job.yaml", "/tmp");
  const std::string d = trainctl::config::summary(dense), m = trainctl::config::summary(moe);
  INFO(d << "\n" << m);
  // Dense (vocab 256, seq_len 128, C 64, 2 layers): 256·64 + 128·64 + 2·(12·64² + 13·64) +
  // 2·64 = 124672, all active.
  CHECK_THAT(d, Catch::Contains("parameters: 124.7K total, 124.7K active per token"));
  // MoE, experts as wide as the MLP (256; 2·256·64 + 256 + 64 = 33088 each): per layer the
  // router (4·64) and three more experts in total, only the router more when active (top 1).
  CHECK_THAT(m, Catch::Contains("parameters: 323.7K total, 125.2K active per token"));
  CHECK_THAT(m, Catch::Contains("moe:        4 experts x 256, top 1 (softmax)"));
  CHECK_THAT(m, Catch::Contains("layers all (2 of 2)"));
}
