#pragma once
// The step-level side of mixture-of-experts layers (model/moe/moe_ffn.h): after each
// optimizer step, every MoE layer's routing statistics of the step (counted in the
// micro-batches' backward passes) are summed over the ranks that saw different tokens (the
// DP group; TP ranks see the same tokens, pipeline stages hold different layers), then
//   - balance: bias: each layer's expert bias takes DeepSeek-V3's step
//     (model/moe/router.h, bias_update) from those global counts, so every rank and every
//     layout moves it the same way;
//   - the figures metrics.jsonl reports (docs/observability.md): moe_aux_loss, each
//     layer's load imbalance (max tokens per expert / mean), its experts' shares of the
//     load, and the fraction of routed assignments the capacity dropped; means over the
//     logging window.
#include <cstdint>
#include <optional>
#include <vector>

#include "comm/communicator.h"
#include "comm/process_groups.h"
#include "model/gpt.h"

namespace trainctl::train {

// A logged line's MoE figures, for the whole model (gathered to every rank).
struct MoeFigures {
  std::optional<double> aux_loss;  // with balance: aux_loss
  // Per model layer (index = layer); nullopt / empty for a dense layer.
  std::vector<std::optional<double>> load_imbalance;
  std::vector<std::vector<double>> expert_load;  // each expert's share of the layer's load
  double dropped_fraction = 0;
};

class MoeBalance {
 public:
  // `dp`: the group whose ranks see different tokens of a step; `sequences_per_step`: the
  // global batch (the aux loss is a mean over the step's sequences).
  MoeBalance(model::Gpt& gpt, comm::Communicator& dp, int64_t sequences_per_step);

  bool active() const { return !layers_.empty() || any_moe_; }
  // Forgets what earlier micro-batches counted (a step's first forward follows).
  void begin_step();
  // After a step's backward passes (collective over `dp` when this rank holds MoE layers;
  // every DP rank holds the same ones): sums the step's statistics, moves the biases when
  // `update` (not on a skipped fp16 step), adds the step to the window.
  void finish_step(bool update);
  // The window's figures for the whole model, gathered to every rank (a collective over
  // the world: all ranks call it on the same logged steps); restarts the window.
  MoeFigures gather_window(const comm::ProcessGroups& groups);

 private:
  struct LayerWindow {
    double imbalance_sum = 0, dropped = 0, assigned = 0, aux = 0;
    std::vector<double> counts;
  };
  std::vector<model::MoeLayer> layers_;
  comm::Communicator& dp_;
  int64_t sequences_;
  bool any_moe_;
  int n_layer_, experts_;
  float bias_rate_;
  bool aux_loss_;
  int window_steps_ = 0;
  std::vector<LayerWindow> window_;  // per entry of layers_
};

}  // namespace trainctl::train
