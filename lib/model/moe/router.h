#pragma once
// The mixture-of-experts router (model/moe/moe_ffn.h), in fp32 on the host whatever the
// backend's matmul precision: plain loops with a fixed summation order, so every TP rank
// (which sees the same whole tokens) and every layout makes the same choices.
//
//   logits = h Wg^T [N, E]
//   scores: softmax(logits) (Mixtral) or sigmoid(logits) (DeepSeek-V3)
//   top_k experts per token by score (+ the expert bias, when given), ties to the lower
//   index;
//   gates: the chosen scores renormalised to sum 1 (softmax: the softmax over the chosen
//   logits, as Mixtral; sigmoid: s / sum of the chosen s, as DeepSeek-V3).
//
// The expert bias (balance: bias, DeepSeek-V3's auxiliary-loss-free balancing) changes only
// which experts a token chooses, never its gates: they are the chosen experts' unbiased
// scores. After each optimizer step every bias moves by update_rate towards balance
// (bias_update below), from the step's token counts summed over every token of the step.
//
// Dispatch groups the (token, choice) assignments by expert, tokens ascending within each,
// then every token once for each shared expert (gate 1). With a capacity (capacity_factor
// > 0) each routed expert keeps its first ceil(capacity_factor * N * top_k / E) tokens
// in token order and drops the rest: a dropped assignment contributes nothing (the
// token's other experts keep their gates; the residual stream carries it through).
//
// The auxiliary balancing loss is sequence-wise (DeepSeek-V3, eq. 17-20), so it does not
// depend on how sequences are grouped into micro-batches: per sequence of T tokens,
//   aux = coef * sum_e f_e P_e,  f_e = E / (k T) * (tokens choosing e),
//   P_e = mean over the sequence of the normalised score q (softmax: p; sigmoid: s / sum s),
// and the loss is the mean over the step's sequences. f is a count (no gradient).
// Context parallelism splits each sequence over the cp ranks: a rank holds T_local of its T
// tokens, f needs the counts of all of them (summed over the cp group), and each rank's
// aux_loss_sum is its tokens' share of the sequence's aux (the shares add up to it).
#include <cstdint>
#include <functional>
#include <vector>

#include "model/model_config.h"

namespace trainctl::model::moe {

struct Routing {
  int N = 0;                  // tokens
  std::vector<float> scores;  // [N, E] softmax probabilities or sigmoids
  std::vector<int> expert;    // [N, k] chosen experts, best first
  std::vector<float> gate;    // [N, k]
  // The grouped rows: routed experts 0..E-1, then shared experts E..E+S-1.
  std::vector<int> row_token;   // [rows] the token of each row
  std::vector<int> row_choice;  // [rows] t * k + j for a routed row, -1 for a shared one
  std::vector<int> offsets;     // [E + S + 1] first row of each expert
  int64_t dropped = 0;          // routed assignments dropped by the capacity
  int rows() const { return offsets.empty() ? 0 : offsets.back(); }
};

// logits [N, E] = h [N, C] Wg^T.
void router_logits(const float* h, const float* wg, int N, int C, int E, float* logits);
// Scores, choices, gates and the dispatch of one micro-batch. `bias` [E] (or null):
// added to the scores for the choice only.
void route(const float* logits, int N, const MoeConfig& cfg, Routing& r,
           const float* bias = nullptr);
// Routed assignments per expert (counts[E] +=), before any capacity drop: the load the
// bias balances.
void count_assignments(const Routing& r, int E, int64_t* counts);
// DeepSeek-V3's bias step: b_e += rate * sign(mean load - load_e) (an overloaded expert's
// bias falls, an idle one's rises), from one step's `counts` [E] over all of its tokens.
void bias_update(const int64_t* counts, int E, float rate, float* bias);
// The f_e of each sequence in a micro-batch of r.N / T_local sequences, T_local of whose T
// tokens are here (T_local == T without context parallelism).
struct SequenceLoads {
  int T_local = 0;
  int T = 0;
  std::vector<double> f;  // [sequences, E]
};
// `sum_counts` (context parallelism): sums the [sequences, E] token counts over the ranks
// holding the other tokens of the same sequences (a collective; exact: the counts are small
// integers in fp32).
using CountSum = std::function<void(float* counts, size_t n)>;
SequenceLoads sequence_loads(const Routing& r, int T_local, int T, const MoeConfig& cfg,
                             const CountSum& sum_counts = {});
// The aux loss of the micro-batch's sequences, summed over them (not averaged): of this
// rank's T_local tokens of each (their share of it under context parallelism).
double aux_loss_sum(const Routing& r, const SequenceLoads& loads, const MoeConfig& cfg);
// dlogits [N, E] (=) from dgate [N, k] and, with `loads` and aux_scale != 0, the aux loss
// weighted aux_scale per sequence.
void router_backward(const Routing& r, const float* dgate, const SequenceLoads* loads,
                     float aux_scale, const MoeConfig& cfg, float* dlogits);
// dwg [E, C] += dlogits^T h; dh [N, C] += dlogits Wg.
void router_weight_grad(const float* dlogits, const float* h, int N, int C, int E, float* dwg);
void router_input_grad(const float* dlogits, const float* wg, int N, int C, int E, float* dh);

}  // namespace trainctl::model::moe
