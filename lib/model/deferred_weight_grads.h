#pragma once
// The weight-gradient half of one (chunk, micro-batch)'s backward, kept for later: the W pass
// of the zero-bubble pipeline schedules (parallel/zero_bubble_schedule.h). B, the backward
// pass that computes input gradients, runs with ModelContext::defer pointing here; each
// linear layer then computes its input gradient at once and records its weight (and bias)
// gradient product instead of running it, with a copy of the gradient of its output (B's
// later layers overwrite the shared buffer holding it). The layer's input is read where the
// forward stored it, in the micro-batch's activation slot, which the pipeline executor
// holds until W; where inputs live elsewhere (recomputed into shared buffers, all-gathered
// under sequence parallelism, context parallelism: ModelContext::deferred_inputs_in_slot)
// it is copied too. Gradient pieces reported during B are recorded in order
// behind their products, so data parallelism starts reducing a layer's gradients only when
// its W has made them final. run() then does the products in B's order, with the same
// kernels on the same values: the sums are bitwise those of an undivided backward.
//
// What stays in B: the norms' and embeddings' gradients (elementwise, cheap), the LM head's
// weight gradient (computed with its loss), and MoE's router and grouped experts (their
// products run per expert on gathered rows; see model/moe/moe_ffn.h).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "model/model_config.h"
#include "model/shard.h"
#include "ops/backend.h"

namespace trainctl::model {

class DeferredWeightGrads {
 public:
  explicit DeferredWeightGrads(ops::Backend& backend) : backend_(backend) {}
  ~DeferredWeightGrads();
  DeferredWeightGrads(const DeferredWeightGrads&) = delete;
  DeferredWeightGrads& operator=(const DeferredWeightGrads&) = delete;

  // A copy of src[0, n) that lives until run() has finished (backend memory, reused by the
  // next B recorded into this object).
  const float* keep(const float* src, size_t n);
  // Work for W, run in the order it was added.
  void add(std::function<void()> work) { work_.push_back(std::move(work)); }
  bool empty() const { return work_.empty(); }
  // Runs the recorded work and forgets it (the copies' memory stays for reuse).
  void run();
  // Floats held by the copies (for memory accounting and tests).
  size_t kept_floats() const;

 private:
  struct Buffer {
    float* data = nullptr;
    size_t capacity = 0;
  };
  ops::Backend& backend_;
  std::vector<Buffer> buffers_;
  size_t used_ = 0;  // buffers handed out since the last run()
  std::vector<std::function<void()>> work_;
};

// Floats one B keeps for its W on the rank holding `shard` (the copies of each deferred
// linear layer's output gradient, and of its input unless `inputs_in_slot`:
// ModelContext::deferred_inputs_in_slot), for micro-batches of `tokens` tokens: the memory
// plan's count (DeferredWeightGrads allocates exactly these, one buffer each). A B covers
// one chunk: with several chunks (zbv), the largest chunk's (the executor reuses its
// holders across chunks, so each grows to that).
int64_t deferred_weight_floats(const ModelConfig& config, const GptShardSpec& shard, int64_t tokens,
                               bool inputs_in_slot);

}  // namespace trainctl::model
