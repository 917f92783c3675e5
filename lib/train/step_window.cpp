#include "train/step_window.h"

namespace trainctl::train {

void StepWindow::add(const StepSample& s) {
  total_.step_ms += s.step_ms;
  total_.comm_s += s.comm_s;
  total_.exposed_s += s.exposed_s;
  total_.pipeline_idle_s += s.pipeline_idle_s;
  total_.sent_bytes += s.sent_bytes;
  ++steps_;
}

StepSample StepWindow::mean() const {
  if (steps_ == 0) return {};
  const auto n = static_cast<double>(steps_);
  return StepSample{.step_ms = total_.step_ms / n,
                    .comm_s = total_.comm_s / n,
                    .exposed_s = total_.exposed_s / n,
                    .pipeline_idle_s = total_.pipeline_idle_s / n,
                    .sent_bytes = per_step_mean(total_.sent_bytes, steps_)};
}

int64_t per_step_mean(int64_t total, int64_t steps) {
  if (steps <= 0) return 0;
  // Integer rounding, half up (bytes are non-negative): exact for any int64 total, where a
  // double would lose the last bits above 2^53.
  return total / steps + (total % steps >= steps - total % steps ? 1 : 0);
}

}  // namespace trainctl::train
