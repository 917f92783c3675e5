#pragma once
// The order of compute ops of the zero-bubble schedule ZB-H1 (parallel.schedule: zb1p; Qi et
// al. 2024, "Zero Bubble Pipeline Parallelism", arXiv 2401.10241, section 3.1). A backward
// is split into B (backward_input: what the stage before waits for) and W (backward_weight:
// what nobody waits for). Stage s of p runs
//   - 1F1B's warm-up: w = min(p-1-s, m) forwards;
//   - m - w rounds of F, B, and from round s on, W of the oldest micro-batch whose W is
//     pending: stage s holds back s Ws, so B travels up the pipeline without waiting for
//     the Ws behind it;
//   - the cool-down: the remaining Bs, each followed by a W; then the Ws still held.
// The Ws held back fill the cool-down, where 1F1B waits for gradients. With F, B and W of
// equal cost every stage idles (p-1) units against 3m of work: a third of 1F1B's bubble
// (m >= p). Every stage holds at most p micro-batches between F and W: 1F1B's peak (its
// first stage's), now on every stage.
#include <vector>

#include "parallel/pipeline_schedule.h"

namespace trainctl::parallel {

struct ComputeStep {
  OpKind kind;  // forward, backward_input or backward_weight
  int micro_batch;
};

// result[s] = stage s's compute ops in order; each micro-batch gets F, then B, then W, and
// each kind runs the micro-batches in order 0..m-1. Needs num_stages >= 1 and
// num_micro_batches >= 1 (std::invalid_argument otherwise).
std::vector<std::vector<ComputeStep>> zero_bubble_h1_order(int num_stages, int num_micro_batches);

}  // namespace trainctl::parallel
