#include "model/attention_acts.h"

namespace trainctl::model {

std::vector<AttentionActs> allocate_attention_acts(ActivationArena& arena, const std::string& name,
                                                   int64_t qkv, int64_t att, int64_t lse,
                                                   bool full_recompute, int slots) {
  if (full_recompute) {
    const AttentionActs shared{arena.shared(name + ".qkv", qkv, MemoryUse::recompute),
                               arena.shared(name + ".att", att, MemoryUse::recompute),
                               arena.shared(name + ".lse", lse, MemoryUse::recompute)};
    return std::vector<AttentionActs>(static_cast<size_t>(slots), shared);
  }
  std::vector<AttentionActs> acts;
  for (int s = 0; s < slots; ++s) {
    // The log-sum-exp stays fp32 (one value a row and head; its exponent is the softmax's).
    acts.push_back({arena.keep(name + ".qkv", qkv, s), arena.keep(name + ".att", att, s),
                    arena.take(lse, MemoryUse::activations)});
  }
  return acts;
}

}  // namespace trainctl::model
