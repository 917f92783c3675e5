#pragma once
// Dynamic loss scaling for fp16 matrix products. fp16 flushes magnitudes below 6e-8 to
// zero and overflows above 65504; a GPT's activation gradients (about dloss / tokens) sit
// mostly below the first. Multiplying the loss gradient by a large scale S lifts them into
// range; the optimizer sees the gradients divided by S again. When a step's gradients come
// out non-finite (something overflowed), the step is skipped and S halves; after
// `growth_interval` finite steps in a row S doubles, so S tracks the largest safe value.
#include <cstdint>

namespace trainctl::optim {

struct LossScalerOptions {
  double initial_scale = 65536.0;  // 2^16, PyTorch GradScaler's default
  int64_t growth_interval = 1000;  // finite steps in a row before the scale doubles
  double min_scale = 1.0;          // never below: an overflow at S = 1 is a real divergence
  double max_scale = 16777216.0;   // 2^24: beyond it fp16 operands overflow anyway
};

struct LossScalerState {
  double scale = 0.0;
  int64_t good_steps = 0;  // finite steps since the last change of scale
};

class DynamicLossScaler {
 public:
  explicit DynamicLossScaler(const LossScalerOptions& options);

  double scale() const { return state_.scale; }
  // Records one step whose (scaled) gradients were finite or not. Returns whether the
  // optimizer may apply this step's gradients (false: skip it, the scale was lowered).
  bool update(bool gradients_finite);

  LossScalerState state() const { return state_; }
  void load(const LossScalerState& state);

 private:
  LossScalerOptions options_;
  LossScalerState state_;
};

}  // namespace trainctl::optim
