#pragma once
// Which samples make up which batch. A step consumes global_batch consecutive sample
// indices [step*GB, (step+1)*GB); micro-batch m on DP rank r takes the rows
// ((m*dp + r)*micro_batch + b). Any (dp, grad_accum) split of the same global batch
// therefore sees the same samples: the basis of layout equivalence and exact resume.
// A run resumed with another global batch continues from the first sample the
// checkpoint had not drawn (first_step / first_sample), so no sample is skipped or
// repeated; with the same global batch that is exactly step*GB again.
#include <cstdint>
#include <vector>

#include "data/dataset.h"

namespace trainctl::data {

struct BatchLayout {
  int micro_batch = 1;
  int seq_len = 1;
  int grad_accum = 1;
  int dp = 1;
  int dp_rank = 0;
  int64_t first_step = 0;    // step `first_step` starts at sample `first_sample`
  int64_t first_sample = 0;  // (a resumed run: the checkpoint's samples_consumed)
  int64_t global_batch() const { return static_cast<int64_t>(micro_batch) * grad_accum * dp; }
  // Samples drawn by all DP ranks before `step`.
  int64_t samples_before(int64_t step) const {
    return first_sample + (step - first_step) * global_batch();
  }
};

uint64_t train_sample_index(const BatchLayout& layout, int64_t step, int micro, int row);

// One optimizer step's micro-batches for one DP rank: [grad_accum, micro_batch, seq_len].
struct StepBatch {
  int64_t step = -1;
  std::vector<int32_t> tokens;
  std::vector<int32_t> targets;
  const int32_t* micro_tokens(const BatchLayout& l, int m) const {
    return tokens.data() + static_cast<size_t>(m) * l.micro_batch * l.seq_len;
  }
  const int32_t* micro_targets(const BatchLayout& l, int m) const {
    return targets.data() + static_cast<size_t>(m) * l.micro_batch * l.seq_len;
  }
};

void fill_step_batch(const Dataset& data, const BatchLayout& layout, int64_t step, StepBatch& out);

// Evaluation batch e (of micro_batch rows) from the validation split: the same rows in
// every evaluation, so validation losses are comparable over time.
void fill_eval_batch(const Dataset& data, const BatchLayout& layout, int64_t e,
                     std::vector<int32_t>& tokens, std::vector<int32_t>& targets);

}  // namespace trainctl::data
