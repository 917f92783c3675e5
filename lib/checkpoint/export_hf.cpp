#include "checkpoint/export_hf.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "checkpoint/durable_file.h"
#include "checkpoint/errors.h"
#include "checkpoint/hf_names.h"
#include "checkpoint/metadata.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/shard_writer.h"
#include "util/error.h"

namespace trainctl::checkpoint {

namespace {

namespace fs = std::filesystem;

std::vector<float> transposed(const std::vector<float>& v, int64_t rows, int64_t cols) {
  std::vector<float> out(v.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c)
      out[static_cast<size_t>(c * rows + r)] = v[static_cast<size_t>(r * cols + c)];
  }
  return out;
}

void write_text(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    out << text;
    if (!out.flush()) throw InputError(path.string() + ": cannot write");
  }
  fs::rename(tmp, path);
}

// A float as the shortest decimal that reads back as the same float: 1e-05, not the
// double 9.999999747378752e-06 that widening 1e-5f gives (transformers reads either, people
// read config.json).
double shortest_decimal(float v) {
  for (int digits = 1; digits < 9; ++digits) {
    char text[32];
    std::snprintf(text, sizeof text, "%.*g", digits, static_cast<double>(v));
    if (std::strtof(text, nullptr) == v) return std::strtod(text, nullptr);
  }
  return v;
}

// Explicit bos/eos ids: the tokenizer's end-of-text token when the run has a tokenizer,
// else null. Left out, a Llama config inherits transformers' defaults (bos 1, eos 2):
// real bytes in a byte-level vocabulary, so `generate` would stop at the first 0x02.
void set_special_token_ids(nlohmann::json& j, const std::optional<int64_t>& eos) {
  j["bos_token_id"] = eos ? nlohmann::json(*eos) : nlohmann::json(nullptr);
  j["eos_token_id"] = eos ? nlohmann::json(*eos) : nlohmann::json(nullptr);
}

nlohmann::json gpt2_config(const model::ModelConfig& c, const std::optional<int64_t>& eos) {
  nlohmann::json j = {{"architectures", {"GPT2LMHeadModel"}},
                      {"model_type", "gpt2"},
                      {"vocab_size", c.vocab_size},
                      {"n_positions", c.max_seq_len},
                      {"n_ctx", c.max_seq_len},
                      {"n_embd", c.d_model},
                      {"n_layer", c.n_layer},
                      {"n_head", c.n_head},
                      {"n_inner", nullptr},
                      {"activation_function", "gelu_new"},
                      {"resid_pdrop", 0.0},
                      {"embd_pdrop", 0.0},
                      {"attn_pdrop", 0.0},
                      {"layer_norm_epsilon", 1e-5},
                      {"initializer_range", 0.02},
                      {"scale_attn_weights", true},
                      {"tie_word_embeddings", true},
                      {"use_cache", true},
                      {"torch_dtype", "float32"},
                      {"producer", "trainctl " TRAINCTL_VERSION}};
  set_special_token_ids(j, eos);
  return j;
}

nlohmann::json llama_config(const model::ModelConfig& c, const std::optional<int64_t>& eos) {
  nlohmann::json j = {{"architectures", {"LlamaForCausalLM"}},
                      {"model_type", "llama"},
                      {"vocab_size", c.vocab_size},
                      {"max_position_embeddings", c.max_seq_len},
                      {"hidden_size", c.d_model},
                      {"intermediate_size", c.mlp_hidden()},
                      {"num_hidden_layers", c.n_layer},
                      {"num_attention_heads", c.n_head},
                      {"num_key_value_heads", c.kv_heads()},
                      {"hidden_act", "silu"},
                      {"rms_norm_eps", shortest_decimal(c.norm_eps)},
                      {"rope_theta", shortest_decimal(c.rope_theta)},
                      {"rope_scaling", nullptr},
                      {"attention_bias", false},
                      {"attention_dropout", 0.0},
                      {"initializer_range", 0.02},
                      {"pretraining_tp", 1},
                      {"tie_word_embeddings", c.tie_embeddings},
                      {"use_cache", true},
                      {"torch_dtype", "float32"},
                      {"producer", "trainctl " TRAINCTL_VERSION}};
  set_special_token_ids(j, eos);
  return j;
}

// MixtralConfig: Llama's attention and norms, every layer's feed-forward a softmax top-k
// mixture of SwiGLU experts (intermediate_size: one expert's width).
nlohmann::json mixtral_config(const model::ModelConfig& c, const std::optional<int64_t>& eos) {
  nlohmann::json j = llama_config(c, eos);
  for (const char* key : {"rope_scaling", "attention_bias", "pretraining_tp"}) j.erase(key);
  j["architectures"] = {"MixtralForCausalLM"};
  j["model_type"] = "mixtral";
  j["intermediate_size"] = c.moe.expert_ffn_hidden;
  j["num_local_experts"] = c.moe.num_experts;
  j["num_experts_per_tok"] = c.moe.top_k;
  j["output_router_logits"] = false;
  j["router_aux_loss_coef"] = c.moe.aux_loss_coef;
  j["sliding_window"] = nullptr;
  return j;
}

// What MixtralForCausalLM computes: why this MoE model is not it, or "" when it is.
std::string mixtral_mismatch(const model::ModelConfig& c) {
  const model::MoeConfig& m = c.moe;
  if (!c.llama()) return "a gpt model (Mixtral is llama + moe)";
  if (m.score != model::MoeScore::softmax) return "score: sigmoid (Mixtral's router is softmax)";
  if (m.shared_experts > 0) return "shared experts (Mixtral has none)";
  if (m.layers_every != 1 || m.layers_from != 0) {
    return "dense layers between the MoE ones (Mixtral's are all MoE: layers: all)";
  }
  if (m.capacity_factor > 0) return "a capacity_factor (Mixtral is dropless)";
  if (m.expert_bias()) return "balance: bias (Mixtral's router has no expert bias)";
  return "";
}

// tokenizer.json with its merges as "a b" strings: tokenizers 0.20 and later write
// [a, b] pairs, which the versions transformers 4.36 needs (< 0.19) cannot read; byte-level
// tokens hold no space, so the string form says the same.
void write_compatible_tokenizer_json(const fs::path& from, const fs::path& to) {
  std::ifstream in(from, std::ios::binary);
  nlohmann::ordered_json doc = nlohmann::ordered_json::parse(in);
  auto& merges = doc["model"]["merges"];
  bool convertible = merges.is_array();
  for (const auto& m : merges) {
    if (m.is_array() && (m.size() != 2 || m[0].get<std::string>().find(' ') != std::string::npos ||
                         m[1].get<std::string>().find(' ') != std::string::npos)) {
      convertible = false;
    }
  }
  if (convertible) {
    for (auto& m : merges) {
      if (m.is_array()) m = m[0].get<std::string>() + " " + m[1].get<std::string>();
    }
  }
  write_text(to, doc.dump(2) + "\n");
}

void copy_tokenizer(const HfExportOptions& o, int max_len) {
  bool fast = false;
  for (const fs::path& f : o.tokenizer_files) {
    // The files are tokenizer.json (under whatever name `data prepare` kept) or GPT-2's
    // vocab.json + merges.txt; AutoTokenizer looks for "tokenizer.json".
    if (f.filename() != "vocab.json" && f.filename() != "merges.txt") {
      write_compatible_tokenizer_json(f, o.out_dir / "tokenizer.json");
      fast = true;
    } else {
      fs::copy_file(f, o.out_dir / f.filename(), fs::copy_options::overwrite_existing);
    }
  }
  if (o.tokenizer_files.empty()) return;
  nlohmann::json cfg = {{"tokenizer_class", fast ? "PreTrainedTokenizerFast" : "GPT2Tokenizer"},
                        {"model_max_length", max_len},
                        {"add_prefix_space", false}};
  write_text(o.out_dir / "tokenizer_config.json", cfg.dump(2) + "\n");
}

}  // namespace

void require_gpt_checkpoint(CheckpointReader& reader) {
  const std::vector<std::string> names = reader.tensor_names();
  auto has = [&](const char* n) { return std::find(names.begin(), names.end(), n) != names.end(); };
  const bool llama = reader.metadata().model.llama();
  const bool ok = llama
                      ? has("model.layers.0.self_attn.q_proj.weight") && has("model.norm.weight")
                      : has("transformer.h.0.attn.c_attn.weight") && has("transformer.wpe.weight");
  if (!ok) {
    throw InputError("checkpoint " + reader.dir().string() + " does not hold the " +
                     model::to_string(reader.metadata().model.family) +
                     " model its metadata.json names (its first block's tensors are missing); "
                     "--format hf exports GPT (GPT2LMHeadModel) and Llama (LlamaForCausalLM) "
                     "models");
  }
}

ExportSummary export_hf(CheckpointReader& reader, const HfExportOptions& o) {
  if (reader.metadata().model.moe.enabled()) return export_hf_mixtral(reader, o);
  if (reader.metadata().model.llama()) return export_hf_llama(reader, o);
  return export_hf_gpt2(reader, o);
}

namespace {

// What both architectures share: the checks, model.safetensors under transformers' names
// (GPT-2's Conv1D weights, when `transpose_conv1d`, stored [in, out]: the transpose of
// trainctl's and nn.Linear's [out, in]), config.json and the tokenizer files.
ExportSummary write_hf_folder(CheckpointReader& reader, const HfExportOptions& o,
                              bool transpose_conv1d, const nlohmann::json& config) {
  const fs::path model_file = o.out_dir / "model.safetensors";
  check_export_target(reader.dir(), model_file);
  require_gpt_checkpoint(reader);
  const std::vector<std::string> problems = reader.check_coverage();
  if (!problems.empty()) throw CheckpointCorrupt(problems.front());
  const std::vector<std::string> names = model_tensor_names(reader);
  auto transposed_here = [&](const std::string& name) {
    return transpose_conv1d && is_hf_conv1d_weight(name);
  };
  std::vector<SafetensorsEntry> entries;
  for (const std::string& name : names) {
    Shape shape = reader.global_shape(name);
    if (transposed_here(name)) std::reverse(shape.begin(), shape.end());
    entries.push_back({name, "F32", shape, 0, 0});
  }
  // transformers refuses safetensors files whose metadata lacks format "pt".
  const std::string header = encode_safetensors_header(
      entries, {{"format", "pt"}, {"producer", "trainctl " TRAINCTL_VERSION}});
  std::error_code ec;
  fs::create_directories(o.out_dir, ec);
  if (ec) throw InputError(o.out_dir.string() + ": cannot create the directory: " + ec.message());
  const ExportSummary summary = write_model_file(
      reader, names, header, model_file, [&](const std::string& name, std::vector<float>& values) {
        if (!transposed_here(name)) return;
        const Shape s = reader.global_shape(name);
        values = transposed(values, s[0], s[1]);
      });
  write_text(o.out_dir / "config.json", config.dump(2) + "\n");
  copy_tokenizer(o, reader.metadata().model.max_seq_len);
  return summary;
}

}  // namespace

// trainctl's llama tensors already carry LlamaForCausalLM's names and nn.Linear layouts,
// and its RoPE is transformers' rotate_half: the tensors go out as they are.
ExportSummary export_hf_llama(CheckpointReader& reader, const HfExportOptions& o) {
  return write_hf_folder(reader, o, false, llama_config(reader.metadata().model, o.eos_token_id));
}

ExportSummary export_hf_mixtral(CheckpointReader& reader, const HfExportOptions& o) {
  const model::ModelConfig& c = reader.metadata().model;
  const std::string why = mixtral_mismatch(c);
  if (!why.empty()) {
    throw InputError("checkpoint " + reader.dir().string() +
                     " holds a mixture-of-experts model with " + why +
                     ", which --format hf cannot write as MixtralForCausalLM (llama + moe, "
                     "softmax top-k, no shared experts, every layer MoE, dropless); use the "
                     "default format");
  }
  // trainctl's MoE llama already carries Mixtral's names (block_sparse_moe.gate,
  // experts.<i>.w1/w2/w3) and nn.Linear layouts.
  return write_hf_folder(reader, o, false, mixtral_config(c, o.eos_token_id));
}

ExportSummary export_hf_gpt2(CheckpointReader& reader, const HfExportOptions& o) {
  return write_hf_folder(reader, o, true, gpt2_config(reader.metadata().model, o.eos_token_id));
}

}  // namespace trainctl::checkpoint
