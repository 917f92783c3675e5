#include "observe/metric_scalars.h"

#include <nlohmann/json.hpp>

namespace trainctl::observe {

Scalars metric_scalars(const nlohmann::ordered_json& line) {
  Scalars out;
  for (const auto& [key, value] : line.items()) {
    if (key == "step") continue;
    if (value.is_number()) {
      out.emplace_back(key, value.get<double>());
    } else if (value.is_boolean()) {
      out.emplace_back(key, value.get<bool>() ? 1.0 : 0.0);
    } else if (value.is_array()) {
      for (size_t i = 0; i < value.size(); ++i) {
        if (value[i].is_number()) {
          out.emplace_back(key + "/" + std::to_string(i), value[i].get<double>());
        }
      }
    }
  }
  return out;
}

}  // namespace trainctl::observe
