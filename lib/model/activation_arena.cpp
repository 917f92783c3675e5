#include "model/activation_arena.h"

#include <stdexcept>

namespace trainctl::model {

ActivationArena::~ActivationArena() {
  for (void* p : owned_) backend_->free(p);
}

float* ActivationArena::take(int64_t floats, MemoryUse use) {
  switch (use) {
    case MemoryUse::activations:
      floats_.activations += floats;
      break;
    case MemoryUse::recompute:
      floats_.recompute += floats;
      break;
    case MemoryUse::workspace:
      floats_.workspace += floats;
      break;
  }
  if (backend_ == nullptr) return nullptr;
  void* p = backend_->alloc(static_cast<size_t>(floats) * sizeof(float));
  owned_.push_back(p);
  return static_cast<float*>(p);
}

float* ActivationArena::shared(const std::string& key, int64_t floats, MemoryUse use) {
  if (auto it = shared_.find(key); it != shared_.end()) {
    if (floats > it->second.floats || use != it->second.use) {
      throw std::logic_error("activation buffer '" + key + "' requested with " +
                             std::to_string(floats) + " floats or another purpose than first");
    }
    return it->second.data;
  }
  float* p = take(floats, use);
  shared_.emplace(key, Shared{p, floats, use});
  return p;
}

}  // namespace trainctl::model
