#include "data/sampler.h"

namespace trainctl::data {

uint64_t train_sample_index(const BatchLayout& l, int64_t step, int micro, int row) {
  return static_cast<uint64_t>(l.samples_before(step) +
                               (static_cast<int64_t>(micro) * l.dp + l.dp_rank) * l.micro_batch +
                               row);
}

void fill_step_batch(const Dataset& data, const BatchLayout& l, int64_t step, StepBatch& out) {
  const size_t n = static_cast<size_t>(l.grad_accum) * l.micro_batch * l.seq_len;
  out.step = step;
  out.tokens.resize(n);
  out.targets.resize(n);
  for (int m = 0; m < l.grad_accum; ++m) {
    for (int b = 0; b < l.micro_batch; ++b) {
      const size_t row = (static_cast<size_t>(m) * l.micro_batch + b) * l.seq_len;
      data.sample(Split::train, train_sample_index(l, step, m, b), out.tokens.data() + row,
                  out.targets.data() + row);
    }
  }
}

void fill_eval_batch(const Dataset& data, const BatchLayout& l, int64_t e,
                     std::vector<int32_t>& tokens, std::vector<int32_t>& targets) {
  const size_t n = static_cast<size_t>(l.micro_batch) * l.seq_len;
  tokens.resize(n);
  targets.resize(n);
  for (int b = 0; b < l.micro_batch; ++b) {
    const size_t row = static_cast<size_t>(b) * l.seq_len;
    data.sample(Split::val, static_cast<uint64_t>(e * l.micro_batch + b), tokens.data() + row,
                targets.data() + row);
  }
}

}  // namespace trainctl::data
