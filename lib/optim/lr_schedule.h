#pragma once
// Learning rate at a step: linear warmup from lr/warmup to lr over `warmup_steps`, then
// decay to `min_lr` at `total_steps` (cosine, linear) or stay (constant).
#include <cstdint>
#include <string>

namespace trainctl::optim {

struct LrSchedule {
  double lr = 1e-3;
  double min_lr = 0.0;
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;
  std::string decay = "cosine";  // cosine | linear | constant

  double at(int64_t step) const;  // step is 0-based
};

}  // namespace trainctl::optim
