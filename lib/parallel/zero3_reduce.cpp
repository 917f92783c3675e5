// ZeRO-3, the reduce-scatter side: a unit's gradients accumulate in one of two transient
// buffers during its use and are reduce-scattered on the communication thread after it;
// this rank's part of the sum is added to its gradient shard.
#include "parallel/zero3_params.h"

#include <stdexcept>

namespace trainctl::parallel {

Zero3Params::GradSlot& Zero3Params::grad_slot(int unit) {
  GradSlot& g = grad_slots_[next_grad_slot_];
  next_grad_slot_ = 1 - next_grad_slot_;
  if (g.unit >= 0) {
    queue_.wait(g.ticket);
    add_reduced(g);
  }
  const Zero3Unit& u = units_[static_cast<size_t>(unit)];
  backend_.zero(g.grads, static_cast<size_t>(u.layout.padded_total()));
  g.unit = unit;
  g.ticket = 0;
  return g;
}

void Zero3Params::release_grads(int unit) {
  for (GradSlot& g : grad_slots_) {
    if (g.unit != unit || g.ticket != 0) continue;
    const float* in = g.grads;
    float* out = g.reduced;
    const auto n = static_cast<size_t>(units_[static_cast<size_t>(unit)].layout.shard_size);
    sent_bytes_ +=
        ring_reduce_scatter_sent(n * sizeof(float) * static_cast<size_t>(dp_.size()), dp_.size());
    g.ticket = queue_.submit([this, in, out, n] { dp_.reduce_scatter(in, out, n); });
    return;
  }
  throw std::logic_error("ZeRO-3: a unit's backward ended that never began");
}

void Zero3Params::add_reduced(GradSlot& g) {
  if (g.unit < 0) return;
  if (g.ticket == 0) throw std::logic_error("ZeRO-3: a block's backward never ended");
  const Zero3Unit& u = units_[static_cast<size_t>(g.unit)];
  backend_.add_inplace(unit_shard(shard_grads_, u), g.reduced,
                       static_cast<size_t>(u.layout.shard_size));
  g.unit = -1;
  g.ticket = 0;
}

void Zero3Params::finish_backward() {
  queue_.wait_all();
  for (GradSlot& g : grad_slots_) add_reduced(g);
}

std::pair<float*, int64_t> Zero3Params::tied_embedding_grad_shard() {
  finish_backward();
  if (resident_.tied < 0) return {nullptr, 0};
  const Zero3Unit& u = units_[static_cast<size_t>(resident_.tied)];
  return {unit_shard(shard_grads_, u), u.layout.shard_size};
}

}  // namespace trainctl::parallel
