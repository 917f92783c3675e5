#include "config/init_from.h"

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <type_traits>

#include "config/number_text.h"
#include "config/spec_keys.h"
#include "util/error.h"

namespace trainctl::config::detail {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

[[noreturn]] void refuse(const fs::path& file, const std::string& problem) {
  throw InputError(file.string() + ": " + problem);
}

int int_field(const json& j, const fs::path& file, const char* key,
              std::optional<int> fallback = std::nullopt) {
  if (!j.contains(key) || j[key].is_null()) {
    if (fallback) return *fallback;
    refuse(file, std::string("has no \"") + key + "\"");
  }
  if (!j[key].is_number_integer() || j[key].get<int64_t>() < 1 ||
      j[key].get<int64_t>() > (1 << 24)) {
    refuse(file, std::string("\"") + key + "\" is not a positive integer");
  }
  return j[key].get<int>();
}

double real_field(const json& j, const fs::path& file, const char* key, double fallback) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_number()) refuse(file, std::string("\"") + key + "\" is not a number");
  return j[key].get<double>();
}

// A setting of config.json that must have one value (the one trainctl's model computes).
void require(const json& j, const fs::path& file, const char* key, const json& wanted,
             const std::string& why) {
  if (j.contains(key) && !j[key].is_null() && j[key] != wanted) {
    refuse(file, std::string("\"") + key + "\" is " + j[key].dump() + "; trainctl builds " + why +
                     " (" + wanted.dump() + ")");
  }
}

ModelSpec gpt2_spec(const json& j, const fs::path& file) {
  ModelSpec m;
  m.type = "gpt";
  m.vocab_size = int_field(j, file, "vocab_size");
  m.seq_len = int_field(j, file, "n_positions");
  m.n_layer = int_field(j, file, "n_layer");
  m.n_head = int_field(j, file, "n_head");
  m.d_model = int_field(j, file, "n_embd");
  if (j.contains("n_inner") && !j["n_inner"].is_null() && j["n_inner"] != 4 * m.d_model) {
    refuse(file, "\"n_inner\" is " + j["n_inner"].dump() + "; trainctl's GPT MLP is 4 n_embd wide");
  }
  require(j, file, "activation_function", "gelu_new", "the tanh GELU");
  require(j, file, "layer_norm_epsilon", 1e-5, "LayerNorm with epsilon 1e-5");
  require(j, file, "tie_word_embeddings", true, "GPT with the LM head tied to wte");
  require(j, file, "scale_attn_by_inverse_layer_idx", false,
          "attention scaled by 1/sqrt(head_dim)");
  require(j, file, "scale_attn_weights", true, "attention scaled by 1/sqrt(head_dim)");
  return m;
}

ModelSpec llama_spec(const json& j, const fs::path& file) {
  ModelSpec m;
  m.type = "llama";
  m.vocab_size = int_field(j, file, "vocab_size");
  m.seq_len = int_field(j, file, "max_position_embeddings", 2048);
  m.n_layer = int_field(j, file, "num_hidden_layers");
  m.n_head = int_field(j, file, "num_attention_heads");
  m.d_model = int_field(j, file, "hidden_size");
  m.n_kv_head = int_field(j, file, "num_key_value_heads", m.n_head);
  m.ffn_hidden = int_field(j, file, "intermediate_size");
  m.norm_eps = real_field(j, file, "rms_norm_eps", 1e-6);
  m.rope_theta = real_field(j, file, "rope_theta", 10000.0);
  m.tie_embeddings = j.contains("tie_word_embeddings") && j["tie_word_embeddings"].is_boolean()
                         ? j["tie_word_embeddings"].get<bool>()
                         : false;
  require(j, file, "hidden_act", "silu", "SwiGLU with SiLU");
  require(j, file, "attention_bias", false, "projections without biases");
  require(j, file, "mlp_bias", false, "projections without biases");
  if (j.contains("rope_scaling") && !j["rope_scaling"].is_null()) {
    refuse(file, "\"rope_scaling\" is " + j["rope_scaling"].dump() +
                     "; trainctl's RoPE has no scaling (remove it only if the model was trained "
                     "without)");
  }
  if (j.contains("head_dim") && !j["head_dim"].is_null() && j["head_dim"] != m.d_model / m.n_head) {
    refuse(file, "\"head_dim\" is " + j["head_dim"].dump() +
                     "; trainctl's heads are hidden_size / num_attention_heads wide");
  }
  return m;
}

// Mixtral: Llama's attention with a mixture of SwiGLU experts in every layer, Mixtral's
// softmax router (model.moe's `score: softmax`, gates renormalised over the top_k).
HfModel mixtral_model(const json& j, const fs::path& file) {
  HfModel out{llama_spec(j, file), 0};
  MoeSpec& moe = out.model.moe;
  moe.num_experts = int_field(j, file, "num_local_experts");
  moe.top_k = int_field(j, file, "num_experts_per_tok", 2);
  moe.expert_ffn_hidden = out.model.ffn_hidden;
  moe.aux_loss_coef = real_field(j, file, "router_aux_loss_coef", 0.001);
  if (j.contains("sliding_window") && !j["sliding_window"].is_null()) {
    out.sliding_window = int_field(j, file, "sliding_window");
  }
  return out;
}

}  // namespace

HfModel hf_model(const fs::path& dir) {
  const fs::path file = dir / "config.json";
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) refuse(dir, "not a directory (a Hugging Face model folder)");
  if (!fs::is_regular_file(file, ec)) {
    refuse(file, "missing: a Hugging Face model folder holds config.json");
  }
  std::ifstream in(file, std::ios::binary);
  json j;
  try {
    j = json::parse(in);
  } catch (const std::exception& e) {
    refuse(file, std::string("not valid JSON: ") + e.what());
  }
  if (!j.is_object() || !j.contains("architectures") || !j["architectures"].is_array() ||
      j["architectures"].size() != 1 || !j["architectures"][0].is_string()) {
    refuse(file,
           "needs \"architectures\" naming one model class (GPT2LMHeadModel, "
           "LlamaForCausalLM or MixtralForCausalLM)");
  }
  const std::string arch = j["architectures"][0].get<std::string>();
  if (arch == "GPT2LMHeadModel") return {gpt2_spec(j, file), 0};
  if (arch == "LlamaForCausalLM") return {llama_spec(j, file), 0};
  if (arch == "MixtralForCausalLM") return mixtral_model(j, file);
  refuse(file, "\"architectures\" is [\"" + arch +
                   "\"]; model.init_from imports GPT2LMHeadModel, LlamaForCausalLM and "
                   "MixtralForCausalLM");
}

namespace {

// One architecture key: taken from config.json unless the spec gave it, then compared.
template <typename T>
void agree(const Locations& at, const char* key, T& spec_value, const T& hf_value,
           const fs::path& file, bool given) {
  if (!given) {
    spec_value = hf_value;
    return;
  }
  bool same = spec_value == hf_value;
  if constexpr (std::is_floating_point_v<T>) {
    same = std::fabs(spec_value - hf_value) <= 1e-6 * std::fabs(hf_value);
  }
  if (same) return;
  std::ostringstream have, want;
  have << spec_value;
  want << hf_value;
  fail(at.where(std::string("model.") + key), std::string("model.") + key,
       "is " + have.str() + " but model.init_from's " + file.string() + " says " + want.str() +
           "; remove the key (config.json sets it) or import another model.");
}

}  // namespace

namespace {

// Llama's own keys, and Mixtral's experts (model.moe: its architecture keys from config.json,
// its training choices, balance and capacity, the spec's).
void apply_llama_keys(ModelSpec& m, const HfModel& hf, const Locations& at, const fs::path& file) {
  auto given = [&](const char* key) { return at.given(std::string("model.") + key); };
  int kv = m.kv_heads();
  agree(at, "n_kv_head", kv, hf.model.n_kv_head, file, given("n_kv_head"));
  m.n_kv_head = kv;
  int ffn = m.mlp_hidden();
  agree(at, "ffn_hidden", ffn, hf.model.ffn_hidden, file,
        given("ffn_hidden") || given("multiple_of"));
  m.ffn_hidden = ffn;
  agree(at, "norm_eps", m.norm_eps, hf.model.norm_eps, file, given("norm_eps"));
  agree(at, "rope_theta", m.rope_theta, hf.model.rope_theta, file, given("rope_theta"));
  agree(at, "tie_embeddings", m.tie_embeddings, hf.model.tie_embeddings, file,
        given("tie_embeddings"));
  const MoeSpec& e = hf.model.moe;
  if (!e.enabled()) {
    bool any_moe_key = m.moe.enabled();
    for (const std::string& key : section_keys("model.moe")) {
      any_moe_key = any_moe_key || given(("moe." + key).c_str());
    }
    if (any_moe_key) {
      fail(at.where("model.moe"), "model.moe",
           "describes experts, but model.init_from's " + file.string() +
               " is a dense model; remove model.moe.");
    }
    return;
  }
  agree(at, "moe.num_experts", m.moe.num_experts, e.num_experts, file, given("moe.num_experts"));
  agree(at, "moe.top_k", m.moe.top_k, e.top_k, file, given("moe.top_k"));
  int width = m.expert_hidden();
  agree(at, "moe.expert_ffn_hidden", width, e.expert_ffn_hidden, file,
        given("moe.expert_ffn_hidden"));
  m.moe.expert_ffn_hidden = width;
  agree(at, "moe.shared_experts", m.moe.shared_experts, 0, file, given("moe.shared_experts"));
  agree(at, "moe.score", m.moe.score, std::string("softmax"), file, given("moe.score"));
  agree(at, "moe.layers", m.moe.layers, std::string("all"), file, given("moe.layers"));
  if (!given("moe.aux_loss_coef")) m.moe.aux_loss_coef = e.aux_loss_coef;
  if (hf.sliding_window > 0 && m.seq_len > hf.sliding_window) {
    fail(at.where("model.seq_len"), "model.seq_len",
         "is " + std::to_string(m.seq_len) + " but model.init_from's " + file.string() +
             " has sliding_window " + std::to_string(hf.sliding_window) +
             " (trainctl's attention has no window); use at most that.");
  }
}

}  // namespace

void apply_init_from(ModelSpec& m, const Locations& at) {
  if (m.init_from.empty()) return;
  if (!m.preset.empty()) {
    fail(at.where("model.preset"), "model.preset",
         "and model.init_from both set the model's dimensions; remove model.preset.");
  }
  const fs::path file = m.init_from / "config.json";
  HfModel hf;
  try {
    hf = hf_model(m.init_from);
  } catch (const InputError& e) {
    fail(at.where("model.init_from"), "model.init_from", e.what());
  }
  auto given = [&](const char* key) { return at.given(std::string("model.") + key); };
  agree(at, "type", m.type, hf.model.type, file, given("type"));
  agree(at, "vocab_size", m.vocab_size, hf.model.vocab_size, file, given("vocab_size"));
  agree(at, "n_layer", m.n_layer, hf.model.n_layer, file, given("n_layer"));
  agree(at, "n_head", m.n_head, hf.model.n_head, file, given("n_head"));
  agree(at, "d_model", m.d_model, hf.model.d_model, file, given("d_model"));
  if (!given("seq_len")) {
    m.seq_len = hf.model.seq_len;
  } else if (!hf.model.is_llama() && m.seq_len > hf.model.seq_len) {
    fail(at.where("model.seq_len"), "model.seq_len",
         "is " + std::to_string(m.seq_len) + " but model.init_from's " + file.string() +
             " has n_positions " + std::to_string(hf.model.seq_len) +
             " (GPT-2's learned positions); use at most that.");
  }
  if (hf.model.is_llama()) {
    apply_llama_keys(m, hf, at, file);
    return;
  }
  for (const char* key : {"n_kv_head", "ffn_hidden", "multiple_of", "norm_eps", "rope_theta",
                          "tie_embeddings", "moe"}) {
    if (given(key) || (std::string(key) == "moe" && m.moe.enabled())) {
      fail(at.where(std::string("model.") + key), std::string("model.") + key,
           "does not apply: model.init_from's " + file.string() +
               " is a GPT2LMHeadModel (dense, learned positions). Remove it.");
    }
  }
}

}  // namespace trainctl::config::detail
