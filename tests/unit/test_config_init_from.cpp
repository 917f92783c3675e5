// model.init_from: config.json supplies the model keys; keys the spec gives must agree, and
// what trainctl cannot build is refused naming config.json (config/init_from.h).
#include "test_config_helpers.h"

using namespace trainctl::config;
using namespace trainctl::config::testing;

namespace {

const char* kLlama = R"({"architectures": ["LlamaForCausalLM"], "vocab_size": 96,
  "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2,
  "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64,
  "rms_norm_eps": 1e-06, "rope_theta": 500000.0, "tie_word_embeddings": false})";

const char* kMixtral = R"({"architectures": ["MixtralForCausalLM"], "vocab_size": 96,
  "hidden_size": 32, "intermediate_size": 24, "num_hidden_layers": 2,
  "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64,
  "rms_norm_eps": 1e-05, "rope_theta": 1e6, "num_local_experts": 4, "num_experts_per_tok": 2,
  "router_aux_loss_coef": 0.02, "sliding_window": 32})";

}  // namespace

TEST_CASE("model.init_from fills the model keys from config.json", "[config][hf]") {
  TempDir dir;
  std::filesystem::create_directories(dir.path() / "m");
  dir.write_text("m/config.json", kLlama);
  const JobSpec s = parse_job_spec("model: {init_from: m, seq_len: 16}\n", "job.yaml", dir.path());
  CHECK(s.model.init_from == dir.path() / "m");
  CHECK(s.model.type == "llama");
  CHECK(s.model.vocab_size == 96);
  CHECK(s.model.d_model == 32);
  CHECK(s.model.n_layer == 2);
  CHECK(s.model.n_kv_head == 2);
  CHECK(s.model.mlp_hidden() == 48);
  CHECK(s.model.norm_eps == 1e-6);
  CHECK(s.model.rope_theta == 500000.0);
  CHECK(s.model.seq_len == 16);  // given: any length for RoPE
  CHECK_FALSE(s.model.tie_embeddings);
  // The resolved spec (every key written out) reads back to the same spec.
  CHECK(parse_job_spec(to_yaml(s), "resolved.yaml", dir.path()) == s);
}

TEST_CASE("a key contradicting model.init_from's config.json is refused", "[config][hf]") {
  TempDir dir;
  std::filesystem::create_directories(dir.path() / "m");
  dir.write_text("m/config.json", kLlama);
  require_error("model: {init_from: m, n_kv_head: 4}\n", "job.yaml:1:", "model.n_kv_head",
                {"is 4 but model.init_from's", "config.json says 2"}, {}, dir.path());
  require_error("model: {init_from: m, type: gpt}\n", "job.yaml:1:", "model.type",
                {"is gpt", "says llama"}, {}, dir.path());
  require_error("model: {init_from: m, preset: gpt-tiny}\n", "job.yaml:1:", "model.preset", {}, {},
                dir.path());
  require_error("model: {init_from: m, moe: {balance: none}}\n", "job.yaml:1:", "model.moe",
                {"is a dense model"}, {}, dir.path());
  dir.write_text("m/config.json", R"({"architectures": ["BertForMaskedLM"]})");
  require_error("model: {init_from: m}\n", "job.yaml:1:", "model.init_from",
                {"m/config.json", "BertForMaskedLM"}, {}, dir.path());
  std::filesystem::remove(dir.path() / "m/config.json");
  require_error("model: {init_from: m}\n", "job.yaml:1:", "model.init_from",
                {"m/config.json: missing"}, {}, dir.path());
}

TEST_CASE("MixtralForCausalLM is llama with model.moe from config.json", "[config][hf]") {
  TempDir dir;
  std::filesystem::create_directories(dir.path() / "m");
  dir.write_text("m/config.json", kMixtral);
  const JobSpec s = parse_job_spec("model: {init_from: m, seq_len: 32, moe: {balance: none}}\n",
                                   "job.yaml", dir.path());
  CHECK(s.model.is_llama());
  CHECK(s.model.moe.num_experts == 4);
  CHECK(s.model.moe.top_k == 2);
  CHECK(s.model.expert_hidden() == 24);
  CHECK(s.model.moe.aux_loss_coef == 0.02);
  CHECK(s.model.moe.balance == "none");  // a training choice: the spec's
  CHECK(parse_job_spec(to_yaml(s), "resolved.yaml", dir.path()) == s);
  require_error("model: {init_from: m, seq_len: 64}\n", "job.yaml:1:", "model.seq_len",
                {"sliding_window 32"}, {}, dir.path());
  require_error("model: {init_from: m, seq_len: 16, moe: {num_experts: 8}}\n",
                "job.yaml:1:", "model.moe.num_experts", {"is 8", "says 4"}, {}, dir.path());
}
