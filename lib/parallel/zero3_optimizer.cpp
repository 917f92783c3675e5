#include "parallel/zero3_optimizer.h"

#include <algorithm>
#include <stdexcept>

namespace trainctl::parallel {

Zero3AdamW::Zero3AdamW(Zero3Params& zero3, const model::ParameterSet& params, ops::Backend& backend,
                       const optim::OptimizerOptions& options)
    : zero3_(zero3), params_(params), backend_(backend), options_(options) {
  if (options.type != "adamw") {
    throw std::invalid_argument("ZeRO-3 supports optimizer.type adamw, not " + options.type);
  }
  // Alignment gaps between parameters stay untouched (zero), as in unsharded AdamW.
  for (const Zero3Params::OwnedRange& r : zero3.owned_ranges()) {
    for (const model::Param& p : params.list()) {
      const int64_t a = std::max(r.begin, p.offset), b = std::min(r.end, p.offset + p.numel);
      if (a < b) segments_.push_back({r.pos + (a - r.begin), b - a, p.weight_decay});
    }
  }
  const auto n = static_cast<size_t>(zero3.shard_floats());
  m_ = static_cast<float*>(backend.alloc(n * sizeof(float)));
  v_ = static_cast<float*>(backend.alloc(n * sizeof(float)));
  backend.zero(m_, n);
  backend.zero(v_, n);
}

Zero3AdamW::~Zero3AdamW() {
  backend_.free(m_);
  backend_.free(v_);
}

double Zero3AdamW::local_grad_sumsq(const std::vector<FloatRange>& counted) const {
  double sum = 0.0;
  const float* grads = zero3_.shard_grads();
  for (const Zero3Params::OwnedRange& r : zero3_.owned_ranges()) {
    if (counted.empty()) {
      sum += backend_.sum_squares(grads + r.pos, static_cast<size_t>(r.end - r.begin));
      continue;
    }
    for (const auto& [b, e] : counted) {
      const int64_t lo = std::max(b, r.begin), hi = std::min(e, r.end);
      if (hi > lo) {
        sum += backend_.sum_squares(grads + r.pos + (lo - r.begin), static_cast<size_t>(hi - lo));
      }
    }
  }
  return sum;
}

void Zero3AdamW::scale_grads(double factor) {
  backend_.scale(zero3_.shard_grads(), static_cast<float>(factor),
                 static_cast<size_t>(zero3_.shard_floats()));
}

void Zero3AdamW::step(double lr) {
  ++t_;
  float* w = zero3_.shard_params();
  const float* g = zero3_.shard_grads();
  for (const Segment& s : segments_) {
    const float wd = s.decay ? static_cast<float>(options_.weight_decay) : 0.0f;
    backend_.adamw(w + s.pos, g + s.pos, m_ + s.pos, v_ + s.pos, static_cast<size_t>(s.count),
                   static_cast<float>(lr), static_cast<float>(options_.beta1),
                   static_cast<float>(options_.beta2), static_cast<float>(options_.eps), wd, t_);
  }
  zero3_.refresh();
}

size_t Zero3AdamW::state_bytes() const {
  return 2 * static_cast<size_t>(zero3_.shard_floats()) * sizeof(float);
}

optim::OptimizerState Zero3AdamW::save_state() {
  optim::OptimizerState s{t_, state_names(), {}};
  s.buffers.push_back(zero3_.gather_flat(m_));
  s.buffers.push_back(zero3_.gather_flat(v_));
  return s;
}

void Zero3AdamW::load_state(const optim::OptimizerState& s) {
  optim::check_state(s, state_names(), params_);
  zero3_.take_shard(s.buffers[0].data(), m_);
  zero3_.take_shard(s.buffers[1].data(), v_);
  t_ = static_cast<int>(s.step);
}

}  // namespace trainctl::parallel
