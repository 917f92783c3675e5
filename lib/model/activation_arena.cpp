#include "model/activation_arena.h"

#include <stdexcept>

namespace trainctl::model {

ActivationArena::~ActivationArena() {
  for (const float* p : exact_) backend_->forget_matmul_exact(p);
  for (void* p : owned_) backend_->free(p);
}

void* ActivationArena::take_bytes(int64_t bytes, MemoryUse use) {
  const int64_t floats = (bytes + static_cast<int64_t>(sizeof(float)) - 1) / sizeof(float);
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
  void* p = backend_->alloc(static_cast<size_t>(bytes));
  owned_.push_back(p);
  return p;
}

float* ActivationArena::take(int64_t floats, MemoryUse use) {
  return static_cast<float*>(take_bytes(floats * static_cast<int64_t>(sizeof(float)), use));
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

int ActivationArena::begin_unit(bool output_leaves) {
  units_.emplace_back();
  output_leaves_ = output_leaves;
  return static_cast<int>(units_.size()) - 1;
}

float* ActivationArena::keep(const std::string& key, int64_t floats, int slot) {
  if (!packs()) return take(floats, MemoryUse::activations);
  if (units_.empty() || slot < 0) {
    throw std::logic_error("ActivationArena::keep('" + key + "') outside a unit");
  }
  const bool first = shared_.count("kept." + key) == 0;
  float* working = shared("kept." + key, floats, MemoryUse::workspace);
  // Every value a product reads there was rounded to the kept type by its producer (or
  // unpacked from a store): when the products round to that same type, they may read it
  // in place rather than round a copy (Backend::note_matmul_exact).
  if (first && backend_ != nullptr && backend_->matmul_dtype() == kept_) {
    backend_->note_matmul_exact(working, static_cast<size_t>(floats));
    exact_.push_back(working);
  }
  store(working, floats, slot, false);
  return working;
}

float* ActivationArena::keep_output(int64_t floats, int slot) {
  if (!packs() && !output_leaves_) return take(floats, MemoryUse::activations);
  if (units_.empty() || slot < 0) {
    throw std::logic_error("ActivationArena::keep_output outside a unit");
  }
  // Block b reads block b-1's output while it writes its own: two working buffers.
  const std::string key = units_.size() % 2 == 1 ? "kept.output.even" : "kept.output.odd";
  float* working = shared(key, floats, MemoryUse::workspace);
  if (!output_leaves_) store(working, floats, slot, true);
  return working;
}

void ActivationArena::store(float* working, int64_t floats, int slot, bool output) {
  auto& slots = units_.back();
  if (slots.size() <= static_cast<size_t>(slot)) slots.resize(static_cast<size_t>(slot) + 1);
  void* bits = take_kept(floats, MemoryUse::activations);
  slots[static_cast<size_t>(slot)].push_back({working, bits, floats, output});
}

void* ActivationArena::take_kept(int64_t floats, MemoryUse use) {
  return take_bytes(floats * static_cast<int64_t>(dtype_size(kept_)), use);
}

const std::vector<ActivationArena::Stored>& ActivationArena::stored(int unit, int slot) const {
  static const std::vector<Stored> none;
  if (unit < 0 || static_cast<size_t>(unit) >= units_.size()) return none;
  const auto& slots = units_[static_cast<size_t>(unit)];
  return static_cast<size_t>(slot) < slots.size() ? slots[static_cast<size_t>(slot)] : none;
}

void ActivationArena::pack(int unit, int slot) {
  for (const Stored& s : stored(unit, slot)) {
    backend_->cast(s.bits, kept_, s.working, DType::fp32, static_cast<size_t>(s.floats));
  }
}

void ActivationArena::unpack_where(int unit, int slot, bool outputs) {
  for (const Stored& s : stored(unit, slot)) {
    if (s.output == outputs) {
      backend_->cast(s.working, DType::fp32, s.bits, kept_, static_cast<size_t>(s.floats));
    }
  }
}

}  // namespace trainctl::model
