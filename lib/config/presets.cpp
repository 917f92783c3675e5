#include "config/presets.h"

#include <array>

namespace trainctl::config {

namespace {
struct Preset {
  const char* name;
  int n_layer, n_head, d_model, seq_len, vocab_size;
};

// gpt2-124m pads GPT-2's 50257 tokens to 50304 (a multiple of 64 and of every small tp).
constexpr std::array<Preset, 3> kPresets = {{
    {"gpt-tiny", 2, 4, 128, 128, 256},
    {"gpt-small", 4, 4, 256, 256, 256},
    {"gpt2-124m", 12, 12, 768, 1024, 50304},
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
    return model;
  }
  return std::nullopt;
}

}  // namespace trainctl::config
