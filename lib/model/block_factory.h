#pragma once
// Which block each layer of the model is, from the ModelConfig: the one place that maps a
// family (and, later, per-layer choices such as which layers get a mixture-of-experts
// feed-forward or context-parallel attention) to Block and Branch types (model/block.h).
#include <memory>

#include "model/block.h"
#include "model/param_list.h"

namespace trainctl::model {

// Layer `layer` of the model, declaring its parameters in `params`.
std::unique_ptr<Block> make_block(const ModelContext& ctx, ParamList& params, int layer);

}  // namespace trainctl::model
