#include "device/cuda_plugin.h"
#include "train/trainer.h"
#include "util/error.h"

namespace trainctl::train {

namespace {
void refuse(const config::JobSpec& spec, const std::string& key, const std::string& why) {
  const std::string where =
      spec.spec_path.empty() ? std::string("job spec") : spec.spec_path.string();
  throw InputError(where + ": " + key + ": " + why);
}
}  // namespace

void check_trainable(const config::JobSpec& spec) {
  if (spec.device == Device::cuda) {
    const device::CudaAvailability gpu = device::cuda_availability();
    if (!gpu.available) refuse(spec, "device", gpu.reason + "; or use device: cpu");
  }
  if (spec.parallel.zero != 0 && spec.optimizer.type != "adamw") {
    refuse(
        spec, "parallel.zero",
        "ZeRO shards AdamW's state; with optimizer.type " + spec.optimizer.type + " use zero: 0");
  }
  if (spec.parallel.zero == 2 && spec.parallel.dp > 1 && spec.parallel.grad_comm != "fp32") {
    refuse(spec, "parallel.grad_comm",
           "ZeRO-2 reduce-scatters gradients in fp32; bf16 gradient communication applies to "
           "zero: 0 and 1. Use grad_comm: fp32 with zero: 2");
  }
}

}  // namespace trainctl::train
