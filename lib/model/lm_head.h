#pragma once
// The model's output: the final norm (gpt: transformer.ln_f, llama: model.norm), the LM
// head (tied to the token embedding, or llama's own lm_head) and the cross-entropy loss.
// At tp 1 one fused op computes losses, d(norm output) and the head's weight gradient
// without ever materialising [N, V] logits; under tensor parallelism the head is
// vocab-parallel: each rank computes its [N, V/tp] logits and only per-row maxima and
// sums cross ranks. Under sequence parallelism the final norm runs on this rank's rows and
// all-gathers its output for the head; d(norm output) is reduce-scattered back to the rows
// (the pair replaces the allreduce of d(norm output)).
#include <cstdint>
#include <vector>

#include "model/activation_arena.h"
#include "model/model_context.h"
#include "model/norm.h"
#include "model/param_list.h"

namespace trainctl::model {

// A sum of token losses and the number of tokens counted (targets >= 0).
struct ChunkLoss {
  double sum = 0.0;
  int64_t count = 0;
};

class LmHead {
 public:
  // Declares the final norm and, after it, lm_head (untied) or, on a last stage without the
  // embedding, the tied token table's copy. `token_table`: the embedding's table when it is
  // on this rank (-1 otherwise), which a tied head uses.
  LmHead(const ModelContext& ctx, ParamList& params, int token_table);
  int first_param() const { return norm_.first_param(); }
  // The head's weight (lm_head, the tied copy or the embedding's table), or -1.
  int weight() const { return weight_; }
  int tied_copy() const { return copy_; }  // -1 when this rank holds none
  int untied_weight() const { return lm_head_; }

  void allocate(ActivationArena& arena, int slots);
  // Loss of the slot's micro-batch from the last block's output `top`, added to *loss;
  // with `backward`, also d(norm output) (kept in the slot) and the head weight's gradient
  // (accumulated now), scaled so each token's loss contributes grad_scale.
  void forward(int slot, const float* top, const int32_t* targets, bool backward, float grad_scale,
               ChunkLoss* loss);
  // dtop = d(top) through the final norm (its gradients accumulate).
  void backward(int slot, const float* top, float* dtop);

 private:
  struct Acts {
    NormActs norm;
    float* losses;  // [N] per token
    float* dnorm;   // [rows(),C] d(norm output) from the loss
  };
  void vocab_parallel_loss(const Acts& a, const int32_t* targets, bool backward, float grad_scale);

  const ModelContext& ctx_;
  Norm norm_;
  int lm_head_ = -1, copy_ = -1, weight_ = -1;
  ops::VocabRange vocab_;
  int V_local_;
  std::vector<Acts> acts_;  // per slot
  // Vocab-parallel scratch (tp > 1): logits [N, V/tp], row maxima [N], partial sums [2N].
  float *logits_ = nullptr, *row_max_ = nullptr, *xent_stats_ = nullptr;
  float* dnorm_full_ = nullptr;  // sequence parallel: d(norm output) [N,C] before the scatter
};

}  // namespace trainctl::model
