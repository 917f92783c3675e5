#pragma once
// Which units (parallel/zero3_units.h) each use of a model's embedding and head parameters
// reads and whose gradients it writes. Shared by the two owners that bind a model's storage
// unit by unit around its uses: ZeRO-3 (parallel/zero3_params.h) and the mixed-precision
// weights (parallel/mixed_params.h).
#include <utility>
#include <vector>

#include "model/gpt.h"
#include "parallel/zero3_units.h"

namespace trainctl::parallel {

struct ResidentUnits {
  // Indices into the units of the model's resident parameters on this rank, or -1.
  int wte = -1, wpe = -1, lnf = -1, tied = -1, head = -1;

  // Looks them up in `units` (zero3_units of `specs`) by the parameters' names, as the
  // model assigns them (the LM head reads lm_head, else the tied embedding: the head
  // stage's copy with pp > 1). Throws std::logic_error when a parameter lies outside every
  // unit.
  static ResidentUnits find(const std::vector<model::ParamSpec>& specs,
                            const std::vector<Zero3Unit>& units);
  // The same for a built model (its specs), checked against the model's own head.
  static ResidentUnits find(const model::Gpt& gpt, const std::vector<Zero3Unit>& units);
  // The most floats a use needs besides its largest unit: the embedding reads wte and wpe,
  // the head ln_f and its weight; a block reads one unit alone. 0 when no use reads two.
  int64_t companion_floats(const std::vector<Zero3Unit>& units) const;
  // The units `use` reads (parameters) and those whose gradients it writes, each once.
  // Throws std::logic_error for a use of a unit this rank lacks.
  std::pair<std::vector<int>, std::vector<int>> of(model::Gpt::ResidentUse use, bool grads) const;
};

// The unit of each of gpt's blocks, checked against the model's block ranges (throws
// std::logic_error when they disagree).
std::vector<int> block_units(const model::Gpt& gpt, const std::vector<Zero3Unit>& units);

}  // namespace trainctl::parallel
