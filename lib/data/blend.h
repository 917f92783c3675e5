#pragma once
// data.type blend: several datasets (text or tokens: token files or `data prepare`
// directories) mixed with weights, as Megatron's `--data-path 0.7 web 0.3 code`. Global
// training sample g comes from the source BlendSchedule picks for g, as that source's next
// sample (its own epochs and shuffle, data/epoch_order.h, with a seed from the blend's seed
// and the source's name). So every global batch holds the sources in proportion to their
// weights, the same on any layout, and the stream's position is each source's count of
// samples drawn, which checkpoints record (positions) and a resume restores (continue_from).
//
// Validation sample e of the blend comes from the same rule over validation indices (the
// blend's val_loss); each source's own validation split is also reachable (source(k)) for
// val_loss/<name>.
#include <memory>
#include <string>
#include <vector>

#include "data/blend_schedule.h"
#include "data/dataset.h"

namespace trainctl::data {

struct BlendPosition {
  std::string name;
  uint64_t samples = 0;
  uint64_t tokens = 0;  // samples * seq_len (the tokens trained on)
  uint64_t epoch = 0;   // samples / the source's epoch size
};

class BlendDataset : public Dataset {
 public:
  explicit BlendDataset(const DatasetOptions& options);
  void sample(Split split, uint64_t index, int32_t* tokens, int32_t* targets) const override;
  std::string describe() const override;
  // The weighted mean of the sources' (a lower bound of the mixture's).
  double unigram_entropy() const override;

  size_t sources() const { return sources_.size(); }
  const std::string& name(size_t k) const { return sources_[k].name; }
  double weight(size_t k) const { return sources_[k].weight; }
  const Dataset& source(size_t k) const { return *sources_[k].data; }

  // Each source's position after the first `samples` global training samples.
  std::vector<BlendPosition> positions(uint64_t samples) const;
  // Continue the stream at global sample `samples` from a checkpoint's positions (by name).
  // When they are what this blend would have drawn, nothing changes (the uninterrupted
  // stream); otherwise (weights or sources changed) each source continues from its recorded
  // count (0 for a new source) and the new weights apply from here. Returns a line to say,
  // empty when nothing changed.
  std::string continue_from(uint64_t samples, const std::vector<BlendPosition>& recorded);

 private:
  struct Source {
    std::string name;
    double weight = 0;
    std::unique_ptr<Dataset> data;
  };
  DatasetOptions opt_;
  std::vector<Source> sources_;
  BlendSchedule train_, val_;
};

// The options of blend source k, as its own dataset.
DatasetOptions source_options(const DatasetOptions& blend, size_t k);

// The `data prepare` directory whose tokenizer made the data's ids: data.path for tokens,
// the first such source of a blend (the pre-launch check makes them agree); empty if none.
std::filesystem::path prepared_directory(const DatasetOptions& options);

}  // namespace trainctl::data
