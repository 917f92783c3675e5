#include "train/blend_progress.h"

#include <nlohmann/json.hpp>

#include "data/blend.h"
#include "data/tokenize_file.h"

namespace trainctl::train {

namespace {

const data::BlendDataset* blend_of(const Engine& e) {
  return dynamic_cast<const data::BlendDataset*>(e.dataset.get());
}

}  // namespace

std::vector<std::pair<std::string, double>> evaluate_sources(Engine& e) {
  std::vector<std::pair<std::string, double>> out;
  const data::BlendDataset* blend = blend_of(e);
  if (!blend) return out;
  for (size_t k = 0; k < blend->sources(); ++k) {
    out.emplace_back(blend->name(k), e.evaluate(false, &blend->source(k)));
  }
  return out;
}

std::vector<checkpoint::SourcePosition> source_positions(const Engine& e, int64_t step) {
  std::vector<checkpoint::SourcePosition> out;
  const data::BlendDataset* blend = blend_of(e);
  if (!blend) return out;
  const auto samples = static_cast<uint64_t>(e.layout.samples_before(step));
  for (const data::BlendPosition& p : blend->positions(samples)) {
    out.push_back({p.name, static_cast<int64_t>(p.samples), static_cast<int64_t>(p.tokens),
                   static_cast<int64_t>(p.epoch)});
  }
  return out;
}

void write_data_sources(const Engine& e, const std::filesystem::path& run_dir, int64_t step) {
  const data::BlendDataset* blend = blend_of(e);
  if (!blend) return;
  const auto samples = static_cast<uint64_t>(e.layout.samples_before(step));
  nlohmann::ordered_json doc;
  doc["step"] = step;
  doc["samples_consumed"] = samples;
  doc["tokens_consumed"] = samples * static_cast<uint64_t>(e.layout.seq_len);
  nlohmann::ordered_json sources = nlohmann::ordered_json::array();
  const std::vector<data::BlendPosition> positions = blend->positions(samples);
  for (size_t k = 0; k < positions.size(); ++k) {
    const data::BlendPosition& p = positions[k];
    sources.push_back(
        {{"name", p.name},
         {"weight", blend->weight(k)},
         {"samples_consumed", p.samples},
         {"tokens_consumed", p.tokens},
         {"share",
          samples > 0 ? static_cast<double>(p.samples) / static_cast<double>(samples) : 0.0},
         {"epoch", p.epoch},
         {"epoch_samples", blend->source(k).epoch_size()}});
  }
  doc["sources"] = std::move(sources);
  const std::string text = doc.dump(2) + "\n";
  data::write_file_atomically(run_dir / "data_sources.json", text.data(), text.size());
}

std::string continue_blend(Engine& e, const checkpoint::CheckpointMetadata& meta) {
  auto* blend = dynamic_cast<data::BlendDataset*>(e.dataset.get());
  if (!blend) return {};
  std::vector<data::BlendPosition> recorded;
  for (const checkpoint::SourcePosition& p : meta.data.sources) {
    recorded.push_back({p.name, static_cast<uint64_t>(p.samples_consumed), 0, 0});
  }
  return blend->continue_from(static_cast<uint64_t>(meta.data.samples_consumed), recorded);
}

}  // namespace trainctl::train
