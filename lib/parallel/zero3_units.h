#pragma once
// How ZeRO-3 (parallel/zero3_params.h) cuts a model shard's flat parameter layout into
// units, each split evenly over the DP ranks, and what that costs in memory. Pure
// functions of the parameter specs: `trainctl plan` sizes ZeRO-3 with them without
// building a model.
#include <cstdint>
#include <vector>

#include "model/parameters.h"
#include "parallel/shard_layout.h"

namespace trainctl::parallel {

struct Zero3Unit {
  int64_t begin = 0, end = 0;  // range of the flat parameter layout
  ShardLayout layout;          // over the DP ranks
  int64_t shard_pos = 0;       // where this rank's shard of it starts in shard_params()
  bool resident = false;       // embedding / head (gathered around each use); else a block
  int block = -1;              // the model's rank-local block index, for block units
};

// The units of the flat layout of a model shard declaring `specs` (gpt_param_specs), over
// `dp_size` ranks: every float in exactly one unit, in order; a block is the parameters
// named "transformer.h.<layer>.*", its unit running to the next block's start; before the
// blocks each parameter is a unit, after them ln_f is one and the tied copy another.
std::vector<Zero3Unit> zero3_units(const std::vector<model::ParamSpec>& specs, int dp_size);

// Floats a Zero3Params (with its Zero3AdamW) allocates for `units`, by purpose, without
// building one (`trainctl plan`; a unit test holds it equal to what is allocated).
struct Zero3MemoryFloats {
  int64_t shard = 0;      // parameters' shard (the gradients' shard and each moment as large)
  int64_t transient = 0;  // two gather and two gradient buffers of the largest unit, two
                          // reduced shards
};
Zero3MemoryFloats zero3_memory_floats(const std::vector<Zero3Unit>& units);

}  // namespace trainctl::parallel
