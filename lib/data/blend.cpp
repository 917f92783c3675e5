#include "data/blend.h"

#include <map>
#include <sstream>

#include "data/manifest.h"
#include "util/error.h"
#include "util/random.h"

namespace trainctl::data {

namespace {

std::vector<double> weights_of(const DatasetOptions& o) {
  std::vector<double> w;
  for (const BlendSourceOptions& s : o.sources) w.push_back(s.weight);
  double sum = 0;
  for (double x : w) sum += x;
  if (w.empty() || !(sum > 0)) {
    throw InputError("data.sources: the weights sum to " + std::to_string(sum) +
                     "; they must sum to a positive number");
  }
  return w;
}

}  // namespace

DatasetOptions source_options(const DatasetOptions& blend, size_t k) {
  const BlendSourceOptions& s = blend.sources[k];
  DatasetOptions o = blend;
  o.type = s.type;
  o.path = s.path;
  o.sources.clear();
  // Each source shuffles with its own seed, tied to its name (not its place in the list).
  o.seed = rng::hash(blend.blend_seed, rng::hash_name(s.name));
  return o;
}

std::filesystem::path prepared_directory(const DatasetOptions& o) {
  if (o.type == "tokens" && is_token_directory(o.path)) return o.path;
  for (const BlendSourceOptions& s : o.sources) {
    if (s.type == "tokens" && is_token_directory(s.path)) return s.path;
  }
  return {};
}

BlendDataset::BlendDataset(const DatasetOptions& options)
    : opt_(options),
      train_(weights_of(options), options.blend_seed),
      val_(weights_of(options), rng::hash(options.blend_seed, 0x5a1d)) {
  for (size_t k = 0; k < options.sources.size(); ++k) {
    try {
      sources_.push_back({options.sources[k].name, options.sources[k].weight,
                          make_dataset(source_options(options, k))});
    } catch (const InputError& e) {
      throw InputError("data.sources[" + std::to_string(k) + "] (" + options.sources[k].name +
                       "): " + e.what());
    }
  }
}

void BlendDataset::sample(Split split, uint64_t index, int32_t* tokens, int32_t* targets) const {
  const BlendSchedule::Pick p = (split == Split::train ? train_ : val_).pick(index);
  sources_[p.source].data->sample(split, p.index, tokens, targets);
}

std::string BlendDataset::describe() const {
  std::ostringstream os;
  os << "blend of " << sources_.size() << " sources:";
  for (const Source& s : sources_) {
    os << "\n    " << s.name << " (weight " << s.weight << "): " << s.data->describe();
  }
  return os.str();
}

double BlendDataset::unigram_entropy() const {
  double h = 0, w = 0;
  for (const Source& s : sources_) {
    h += s.weight * s.data->unigram_entropy();
    w += s.weight;
  }
  return h / w;
}

std::vector<BlendPosition> BlendDataset::positions(uint64_t samples) const {
  const std::vector<uint64_t> counts = train_.counts_before(samples);
  std::vector<BlendPosition> out;
  for (size_t k = 0; k < sources_.size(); ++k) {
    const uint64_t epoch_size = sources_[k].data->epoch_size();
    out.push_back({sources_[k].name, counts[k], counts[k] * static_cast<uint64_t>(opt_.seq_len),
                   epoch_size > 0 ? counts[k] / epoch_size : 0});
  }
  return out;
}

std::string BlendDataset::continue_from(uint64_t samples,
                                        const std::vector<BlendPosition>& recorded) {
  std::map<std::string, uint64_t> by_name;
  for (const BlendPosition& p : recorded) by_name[p.name] = p.samples;
  std::vector<uint64_t> counts;
  for (const Source& s : sources_) {
    const auto it = by_name.find(s.name);
    counts.push_back(it == by_name.end() ? 0 : it->second);
  }
  if (recorded.size() == sources_.size() && train_.counts_before(samples) == counts) return {};
  train_.rebase(samples, counts);
  std::string line = "data blend changed since the checkpoint: from sample " +
                     std::to_string(samples) +
                     " the sources are drawn with the new weights, each "
                     "continuing where it stopped (";
  for (size_t k = 0; k < sources_.size(); ++k) {
    line += (k ? ", " : "") + sources_[k].name + " at sample " + std::to_string(counts[k]);
  }
  return line + ")";
}

}  // namespace trainctl::data
