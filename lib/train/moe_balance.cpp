#include "train/moe_balance.h"

#include <algorithm>
#include <cmath>

#include "model/moe/moe_ffn.h"
#include "model/moe/router.h"

namespace trainctl::train {

namespace {

// Counts travel through the float collective as two 12-bit halves: each sum stays exact
// (below 2^24) for up to 2^36 assignments per expert and step and 4096 DP ranks.
constexpr int kHalfBits = 12;
constexpr int64_t kHalfMask = (int64_t{1} << kHalfBits) - 1;

void put_count(int64_t c, float* at) {
  at[0] = static_cast<float>(c >> kHalfBits);
  at[1] = static_cast<float>(c & kHalfMask);
}

int64_t get_count(const float* at) {
  return (static_cast<int64_t>(at[0]) << kHalfBits) + static_cast<int64_t>(at[1]);
}

}  // namespace

MoeBalance::MoeBalance(model::Gpt& gpt, comm::Communicator& dp, int64_t sequences_per_step)
    : layers_(gpt.moe_layers()),
      dp_(dp),
      sequences_(sequences_per_step),
      any_moe_(gpt.config().moe.enabled()),
      n_layer_(gpt.config().n_layer),
      experts_(gpt.config().moe.num_experts),
      bias_rate_(gpt.config().moe.bias_update_rate),
      aux_loss_(gpt.config().moe.aux_loss_coef > 0),
      window_(layers_.size()) {
  for (LayerWindow& w : window_) w.counts.assign(static_cast<size_t>(experts_), 0.0);
}

void MoeBalance::begin_step() {
  for (const model::MoeLayer& l : layers_) l.ffn->take_step_stats();
}

void MoeBalance::finish_step(bool update) {
  if (any_moe_) ++window_steps_;
  if (layers_.empty()) return;
  const size_t E = static_cast<size_t>(experts_), stride = 2 * E + 3;
  std::vector<float> buf(layers_.size() * stride, 0.0f);
  for (size_t i = 0; i < layers_.size(); ++i) {
    const model::moe::MoeFfn::StepStats s = layers_[i].ffn->take_step_stats();
    float* at = buf.data() + i * stride;
    for (size_t e = 0; e < E; ++e) put_count(s.counts[e], at + 2 * e);
    put_count(s.dropped, at + 2 * E);
    at[2 * E + 2] = static_cast<float>(s.aux_sum);
  }
  if (dp_.size() > 1) dp_.allreduce(buf.data(), buf.size());
  std::vector<int64_t> counts(E);
  for (size_t i = 0; i < layers_.size(); ++i) {
    const float* at = buf.data() + i * stride;
    int64_t total = 0, most = 0;
    for (size_t e = 0; e < E; ++e) {
      counts[e] = get_count(at + 2 * e);
      total += counts[e];
      most = std::max(most, counts[e]);
    }
    model::moe::MoeFfn& ffn = *layers_[i].ffn;
    if (update && !ffn.expert_bias().empty()) {
      model::moe::bias_update(counts.data(), experts_, bias_rate_, ffn.expert_bias().data());
    }
    LayerWindow& w = window_[i];
    const double mean = static_cast<double>(total) / static_cast<double>(E);
    w.imbalance_sum += total > 0 ? static_cast<double>(most) / mean : 1.0;
    w.dropped += static_cast<double>(get_count(at + 2 * E));
    w.assigned += static_cast<double>(total);
    w.aux += at[2 * E + 2] / static_cast<double>(sequences_);
    for (size_t e = 0; e < E; ++e) w.counts[e] += static_cast<double>(counts[e]);
  }
}

MoeFigures MoeBalance::gather_window(const comm::ProcessGroups& groups) {
  MoeFigures f;
  if (!any_moe_) return f;
  // Per model layer: [is MoE, imbalance, dropped fraction, aux, shares[E]], filled by the
  // one rank of each stage that speaks for its DP replicas, TP copies and CP ranks (the
  // window's sums are over the gradient group, dp x cp, already).
  const size_t E = static_cast<size_t>(experts_), stride = 4 + E;
  std::vector<float> buf(static_cast<size_t>(n_layer_) * stride, 0.0f);
  const double steps = std::max(window_steps_, 1);
  if (groups.coord.dp == 0 && groups.coord.tp == 0 && groups.coord.cp == 0) {
    for (size_t i = 0; i < layers_.size(); ++i) {
      const LayerWindow& w = window_[i];
      float* at = buf.data() + static_cast<size_t>(layers_[i].layer) * stride;
      at[0] = 1.0f;
      at[1] = static_cast<float>(w.imbalance_sum / steps);
      at[2] = static_cast<float>(w.assigned > 0 ? w.dropped / w.assigned : 0.0);
      at[3] = static_cast<float>(w.aux / steps);
      for (size_t e = 0; e < E; ++e) {
        at[4 + e] = static_cast<float>(w.assigned > 0 ? w.counts[e] / w.assigned : 0.0);
      }
    }
  }
  if (groups.world->size() > 1) groups.world->allreduce(buf.data(), buf.size());
  double aux = 0, dropped = 0;
  int moe_layers = 0;
  f.load_imbalance.resize(static_cast<size_t>(n_layer_));
  f.expert_load.resize(static_cast<size_t>(n_layer_));
  for (size_t l = 0; l < static_cast<size_t>(n_layer_); ++l) {
    const float* at = buf.data() + l * stride;
    if (at[0] == 0.0f) continue;
    ++moe_layers;
    f.load_imbalance[l] = at[1];
    dropped += at[2];
    aux += at[3];
    f.expert_load[l].assign(at + 4, at + 4 + E);
  }
  // Every MoE layer routes the same number of assignments: the model's dropped fraction
  // is the layers' mean.
  f.dropped_fraction = moe_layers > 0 ? dropped / moe_layers : 0.0;
  if (aux_loss_) f.aux_loss = aux;
  window_steps_ = 0;
  for (LayerWindow& w : window_) {
    w = LayerWindow{};
    w.counts.assign(E, 0.0);
  }
  return f;
}

}  // namespace trainctl::train
