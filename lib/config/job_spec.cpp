#include "config/job_spec.h"

#include <tuple>

namespace trainctl::config {

const char* to_string(Device d) {
  switch (d) {
    case Device::cpu:
      return "cpu";
    case Device::cuda:
      return "cuda";
  }
  return "?";
}

const char* to_string(DType d) {
  switch (d) {
    case DType::fp32:
      return "fp32";
    case DType::bf16:
      return "bf16";
    case DType::fp16:
      return "fp16";
  }
  return "?";
}

bool JobSpec::operator==(const JobSpec& o) const {
  auto fields = [](const JobSpec& s) {
    return std::tie(s.name, s.run_dir, s.seed, s.device, s.model, s.data, s.parallel, s.training,
                    s.optimizer, s.precision, s.checkpoint, s.logging, s.runtime);
  };
  return fields(*this) == fields(o);
}

}  // namespace trainctl::config
