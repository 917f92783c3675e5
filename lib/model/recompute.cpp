#include "model/recompute.h"

#include <stdexcept>

namespace trainctl::model {

const char* to_string(Recompute r) {
  switch (r) {
    case Recompute::none:
      return "none";
    case Recompute::selective:
      return "selective";
    case Recompute::full:
      return "full";
  }
  return "none";
}

Recompute parse_recompute(const std::string& name) {
  if (name == "none") return Recompute::none;
  if (name == "selective") return Recompute::selective;
  if (name == "full") return Recompute::full;
  throw std::invalid_argument("activation recomputation must be none, selective or full, not '" +
                              name + "'");
}

}  // namespace trainctl::model
