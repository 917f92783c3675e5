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

std::string JobSpec::where(const std::string& key_path) const {
  auto it = key_origins.find(key_path);
  if (it != key_origins.end()) return it->second;
  return spec_path.empty() ? std::string("job spec") : spec_path.string();
}

bool JobSpec::operator==(const JobSpec& o) const {
  auto fields = [](const JobSpec& s) {
    return std::tie(s.name, s.run_dir, s.seed, s.device, s.model, s.data, s.parallel, s.training,
                    s.optimizer, s.precision, s.checkpoint, s.logging, s.runtime);
  };
  return fields(*this) == fields(o);
}

}  // namespace trainctl::config
