#include "parallel/replica_exchange.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace trainctl::parallel {

void sum_over_replicas(comm::Communicator& group, float* grads, size_t n, float* tail, size_t k,
                       float scale, bool counted, std::vector<float>& staging) {
  if (!counted) {
    std::fill(grads, grads + n, 0.0f);
    std::fill(tail, tail + k, 0.0f);
  }
  if (group.size() > 1) {
    // One collective for both: on loopback TCP each call costs more than the copies.
    staging.resize(n + k);
    std::copy(grads, grads + n, staging.begin());
    std::copy(tail, tail + k, staging.begin() + static_cast<std::ptrdiff_t>(n));
    group.allreduce(staging.data(), n + k);
    std::copy(staging.begin() + static_cast<std::ptrdiff_t>(n), staging.end(), tail);
    for (size_t i = 0; i < n; ++i) grads[i] = staging[i] * scale;
    return;
  }
  if (scale != 1.0f) {
    for (size_t i = 0; i < n; ++i) grads[i] *= scale;
  }
}

void copy_replica_state(comm::Communicator& group, int source, model::Gpt& gpt,
                        optim::Optimizer& optimizer, ReplicaPosition& position,
                        const std::vector<std::vector<float>*>& extra) {
  // The position travels as the bits of four int64 (a broadcast moves floats unchanged).
  optim::OptimizerState state = optimizer.save_state();
  float header[8];
  position.optimizer_step = state.step;
  static_assert(sizeof header == sizeof(ReplicaPosition));
  std::memcpy(header, &position, sizeof header);
  group.broadcast(header, 8, source);
  std::memcpy(&position, header, sizeof header);
  model::ParameterSet& params = gpt.params();
  const auto total = static_cast<size_t>(params.total());
  group.broadcast(params.data(), total, source);
  for (std::vector<float>& buffer : state.buffers)
    group.broadcast(buffer.data(), buffer.size(), source);
  state.step = position.optimizer_step;
  optimizer.load_state(state);
  for (std::vector<float>* buffer : extra) group.broadcast(buffer->data(), buffer->size(), source);
}

}  // namespace trainctl::parallel
