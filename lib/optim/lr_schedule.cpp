#include "optim/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace trainctl::optim {

double LrSchedule::at(int64_t step) const {
  if (step < warmup_steps) {
    return lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  }
  if (decay == "constant" || total_steps <= warmup_steps) return lr;
  const double progress = std::clamp(
      static_cast<double>(step - warmup_steps) / static_cast<double>(total_steps - warmup_steps),
      0.0, 1.0);
  const double factor =
      decay == "linear" ? 1.0 - progress : 0.5 * (1.0 + std::cos(3.141592653589793 * progress));
  return min_lr + (lr - min_lr) * factor;
}

}  // namespace trainctl::optim
