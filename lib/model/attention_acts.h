#pragma once
// What both attention branches (attention_mha, attention_gqa) keep of a micro-batch for
// backward: the projected q|k|v, the attention output before the out-projection and each
// row's log-sum-exp (flash-style: no [T, T] probabilities). One slot per micro-batch in
// flight, or one shared set refilled by recomputation.
#include <cstdint>
#include <string>
#include <vector>

#include "model/activation_arena.h"

namespace trainctl::model {

struct AttentionActs {
  float* qkv;  // [N, qkv_width / tp]
  float* att;  // [N, C / tp]
  float* lse;  // [B, NH / tp, T]
};

// `slots` sets of the sizes given (in floats); with full recomputation one set under
// `name`.qkv/.att/.lse shared by every slot. q|k|v and the output are kept activations
// (ActivationArena::keep: 16-bit under mixed precision), the log-sum-exp fp32.
std::vector<AttentionActs> allocate_attention_acts(ActivationArena& arena, const std::string& name,
                                                   int64_t qkv, int64_t att, int64_t lse,
                                                   bool full_recompute, int slots);

}  // namespace trainctl::model
