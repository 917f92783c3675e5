// The collectives of ModelContext (model/model_context.h): tensor parallelism's allreduce
// at a row-parallel output, and sequence parallelism's reduce-scatter / all-gather pair that
// replaces it (Korthikanti et al. 2022). In a ring, reduce-scatter + all-gather move the
// same bytes as the one allreduce they replace.
#include <stdexcept>

#include "model/model_context.h"

namespace trainctl::model {

void ModelContext::tp_sum_rows(float* y) const {
  if (!sp()) {
    tp_allreduce(y, NC());
    return;
  }
  if (sp_rows == nullptr) throw std::logic_error("sequence parallelism: no row scratch");
  // Out of place: a reduce-scatter may not write the block it still has to send.
  sp_scatter_sum(y, sp_rows);
  be().copy(y, sp_rows, rows_C());
}

void ModelContext::sp_scatter_sum(const float* full, float* local) const {
  tp->reduce_scatter(full, local, rows_C());
}

void ModelContext::sp_gather(const float* local, float* full) const {
  tp->allgather(local, full, rows_C());
}

}  // namespace trainctl::model
