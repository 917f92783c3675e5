#include "config/presets.h"

#include <array>

namespace trainctl::config {

namespace {
struct Preset {
  const char* name;
  const char* type;
  int n_layer, n_head, d_model, seq_len, vocab_size;
  // Llama only (0: n_head / from multiple_of).
  int n_kv_head = 0, ffn_hidden = 0;
  double rope_theta = 10000;
};

// gpt2-124m pads GPT-2's 50257 tokens to 50304 (a multiple of 64 and of every small tp).
// The llama test sizes share k/v heads in pairs so grouped-query attention runs at tp 1 and
// 2; llama2-7b and llama3-8b are Meta's shapes (Llama 3's 128256 tokens divide by 8 tp).
constexpr std::array<Preset, 7> kPresets = {{
    {"gpt-tiny", "gpt", 2, 4, 128, 128, 256},
    {"gpt-small", "gpt", 4, 4, 256, 256, 256},
    {"gpt2-124m", "gpt", 12, 12, 768, 1024, 50304},
    {"llama-tiny", "llama", 2, 4, 128, 128, 256, 2, 0, 10000},
    {"llama-small", "llama", 4, 8, 256, 256, 256, 4, 0, 10000},
    {"llama2-7b", "llama", 32, 32, 4096, 4096, 32000, 32, 11008, 10000},
    {"llama3-8b", "llama", 32, 32, 4096, 8192, 128256, 8, 14336, 500000},
}};
}  // namespace

const std::vector<std::string>& preset_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const Preset& p : kPresets) out.emplace_back(p.name);
    return out;
  }();
  return names;
}

std::optional<ModelSpec> find_preset(const std::string& name) {
  for (const Preset& p : kPresets) {
    if (name != p.name) continue;
    ModelSpec model;
    model.preset = p.name;
    model.n_layer = p.n_layer;
    model.n_head = p.n_head;
    model.d_model = p.d_model;
    model.seq_len = p.seq_len;
    model.vocab_size = p.vocab_size;
    model.type = p.type;
    model.n_kv_head = p.n_kv_head;
    model.ffn_hidden = p.ffn_hidden;
    model.rope_theta = p.rope_theta;
    return model;
  }
  return std::nullopt;
}

}  // namespace trainctl::config
