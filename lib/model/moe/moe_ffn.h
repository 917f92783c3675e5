#pragma once
// The mixture-of-experts feed-forward: a Branch (model/block.h) in the feed-forward slot of
// the layers ModelConfig::moe selects (model/block_factory.cpp). Llama + MoE is Mixtral
// (SwiGLU experts); gpt + MoE has GELU experts.
//
//   router (model/moe/router.h): fp32 logits h Wg^T, scores, top_k, gates, dispatch;
//   experts (model/moe/grouped_experts.h): the tokens gathered in expert order, one
//   product per expert and weight over its rows;
//   y[t] = sum over t's kept rows of gate * expert output (shared experts: gate 1).
//
// Parameters, in flat order: `prefix`.gate.weight [E, C] (replicated: the router sees whole
// tokens, the same on every TP rank), `prefix`.experts.<i>.*, then
// `prefix`.shared_experts.<i>.*. Checkpoint names: llama
// model.layers.<l>.block_sparse_moe.* (Mixtral's), gpt transformer.h.<l>.moe.*.
//
// Tensor parallelism: every expert is split over the TP group like the dense MLP: each rank
// computes its hidden slice of every token's experts and the combined output is allreduced
// once.
//
// Expert parallelism (shard.ep_size > 1): this rank holds E / ep of the routed experts
// (still TP-split, so tp and ep compose without another layout of the weights); the rows
// for other ranks' experts travel there and their outputs back by all-to-all
// (model/moe/expert_dispatch.h), through the ep group of the ranks with the same TP rank.
// Routing, gates, the aux loss and the shared experts stay local. The "expert side" of a
// slot is the rows this rank's experts compute: the received routed rows grouped by local
// expert, then the local shared-expert rows; without ep it is the local rows themselves. d(gate)
// needs the whole expert output, so its TP-partial dot products are allreduced ([N, top_k] floats);
// the router's backward then runs identically on every TP rank and its input gradient is added
// after the TP allreduce of the experts' part. So routing, gates, aux loss and the router's
// gradients are the same on every layout.
//
// The auxiliary loss's gradient is scaled by the micro-batch's gradient scale
// (ModelContext::grad_scale) times T per sequence: the loss is coef * (mean over the step's
// sequences of the sequence-wise aux), added to the cross-entropy's objective.
//
// balance: bias: the expert bias [E] is a buffer (no gradient, no optimizer state),
// replicated on every rank; the engine updates it after each step from the step's token
// counts summed over the ranks that saw different tokens (train/moe_balance.h), and the
// checkpoint keeps it as `prefix`.gate.e_score_correction_bias (DeepSeek-V3's name).
//
// CPU only: the dispatch and the router are host loops over the backend's buffers (the
// job spec refuses device: cuda with MoE).
#include <memory>
#include <string>
#include <vector>

#include "model/block.h"
#include "model/moe/expert_dispatch.h"
#include "model/moe/grouped_experts.h"
#include "model/moe/router.h"
#include "model/param_list.h"

namespace trainctl::model::moe {

class MoeFfn final : public Branch {
 public:
  MoeFfn(const ModelContext& ctx, ParamList& params, const std::string& prefix);

  void allocate(ActivationArena& arena, int slots) override;
  void forward(int slot, const float* h, float* y) override;
  void refill(int slot, float* y) override;
  void backward(int slot, const float* h, const float* dy, float* dh,
                const PieceReport& report) override;
  double macs_per_token(int seq_len) const override;

  // The last forward's routing of `slot` (tests, statistics).
  const Routing& routing(int slot) const { return acts_.at(static_cast<size_t>(slot)).routing; }
  int gate_param() const { return gate_; }

  // The expert bias (empty unless balance: bias) and its checkpoint name.
  std::vector<float>& expert_bias() { return bias_; }
  const std::string& expert_bias_name() const { return bias_name_; }
  // What the training micro-batches routed since the last take_step_stats() (counted in
  // their backward passes; evaluation's forward passes are not).
  struct StepStats {
    std::vector<int64_t> counts;  // [E] routed assignments per expert, before capacity drops
    int64_t dropped = 0;          // assignments the capacity dropped
    double aux_sum = 0;           // the aux loss summed over the sequences (with its coef)
  };
  StepStats take_step_stats();

 private:
  struct Acts {
    Routing routing;
    float aux_scale = 0;  // the aux loss's weight per sequence
    // Expert side: offsets [local experts + shared + 1] and the routed rows it starts with.
    std::vector<int> offsets;
    int routed_rows = 0;
    DispatchPlan plan;      // ep only
    float* x = nullptr;     // ep: expert-side inputs [rows, C]: kept unless full
    float* back = nullptr;  // ep: the routed rows' outputs back in local order [rows, C]
    float* fc;              // [rows, fc_width]: kept unless recomputation is full
    float* act;             // [rows, H/tp]: kept only without recomputation
    float* out;             // [rows, C] the experts' TP-partial outputs: kept unless full
  };
  bool expert_parallel() const { return ctx_.shard.ep_size > 1; }
  void gather(const Routing& r, const float* h, float* x) const;
  // The expert side of a's routing (ep: collective over the ep group): offsets, plan, x.
  void to_expert_side(Acts& a, const float* x_local);
  // Local rows -> expert side (`from` local rows [rows, C], `to` expert side) and back.
  void local_to_experts(const Acts& a, const float* from, float* to);
  void experts_to_local(const Acts& a, const float* from, float* to);
  // out from act, y = the gated sum of out, allreduced over the TP group.
  void project_and_combine(const Acts& a, float* y);
  // Local row p's expert output (TP-partial).
  const float* output_row(const Acts& a, int p) const;

  const ModelContext& ctx_;
  int gate_;
  GroupedExperts routed_, shared_;
  std::unique_ptr<ExpertDispatch> dispatch_;  // ep only, once the model runs
  std::vector<Acts> acts_;                    // per slot
  int64_t max_rows_;                          // local rows: N * (top_k + shared_experts)
  int64_t max_expert_rows_;  // expert side: ep * N * top_k (dropless) + N * shared_experts
  std::vector<float> bias_;
  std::string bias_name_;
  StepStats stats_;
  // Scratch: the gathered tokens (ep: then expert-side d(out) and d(x)), d(out) (then d(x)),
  // d(act), d(fc), logits, dlogits, d(gate), the all-to-all's staging rows.
  float *x_ = nullptr, *d_out_ = nullptr, *d_act_ = nullptr, *d_fc_ = nullptr;
  float *logits_ = nullptr, *dlogits_ = nullptr, *dgate_ = nullptr, *staging_ = nullptr;
};

}  // namespace trainctl::model::moe
