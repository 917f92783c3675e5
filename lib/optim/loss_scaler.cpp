#include "optim/loss_scaler.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace trainctl::optim {

DynamicLossScaler::DynamicLossScaler(const LossScalerOptions& options) : options_(options) {
  if (!(options.min_scale > 0) || options.max_scale < options.min_scale ||
      options.growth_interval < 1) {
    throw std::invalid_argument("loss scaler: need 0 < min_scale <= max_scale, interval >= 1");
  }
  state_.scale = std::clamp(options.initial_scale, options.min_scale, options.max_scale);
}

bool DynamicLossScaler::update(bool gradients_finite) {
  if (!gradients_finite) {
    state_.scale = std::max(options_.min_scale, state_.scale / 2);
    state_.good_steps = 0;
    return false;
  }
  if (++state_.good_steps >= options_.growth_interval) {
    state_.scale = std::min(options_.max_scale, state_.scale * 2);
    state_.good_steps = 0;
  }
  return true;
}

void DynamicLossScaler::load(const LossScalerState& state) {
  if (!(state.scale > 0) || !std::isfinite(state.scale) || state.good_steps < 0) {
    throw std::invalid_argument("loss scaler: bad saved state (scale " +
                                std::to_string(state.scale) + ")");
  }
  state_ = state;
}

}  // namespace trainctl::optim
