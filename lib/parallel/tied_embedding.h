#pragma once
// The LM head is tied to the token embedding. With pipeline parallelism the first stage
// holds wte and the last stage a copy: both must apply the same update, so after the
// step's backward passes each end adds the other end's gradient to its own (the sum is
// the unsplit model's gradient, and a + b == b + a bit for bit, so the two copies stay
// identical). Must run before data-parallel reduction (it acts on each rank's local
// gradient; the DP sums then agree on both ends). Under ZeRO-3 the local gradient is
// gone by then (reduce-scattered per micro-batch): the two ends exchange their shards of
// the DP sums instead (wte's unit and the copy's are sharded alike), which is the same sum.
#include "comm/communicator.h"
#include "model/gpt.h"
#include "parallel/zero3_params.h"

namespace trainctl::parallel {

// No-op unless `gpt` is the first or last stage of a pipeline (Gpt::exchanges_tied_embedding).
// `pp` is the pipeline group (group rank == stage). Afterwards reports the tied embedding's
// gradient piece to the model's grad-ready hook when `report`. `zero3`: the model's ZeRO-3
// shards (null: none); the exchange then finishes their backward first.
void exchange_tied_embedding_grad(model::Gpt& gpt, comm::Communicator& pp, bool report,
                                  Zero3Params* zero3 = nullptr);

}  // namespace trainctl::parallel
