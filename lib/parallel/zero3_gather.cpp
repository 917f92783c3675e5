// ZeRO-3, the gather side: units allgathered into the two transient parameter buffers on
// the communication thread, ahead of their use where the hooks can prefetch.
#include "parallel/zero3_params.h"

namespace trainctl::parallel {

Zero3Params::Slot& Zero3Params::gathered(int unit, const Slot* keep) {
  for (Slot& s : slots_) {
    if (s.unit == unit) {
      queue_.wait(s.ticket);
      return s;
    }
  }
  // No slot is in use by a computation between hooks (but `keep`): take them in turn.
  if (&slots_[victim_] == keep) victim_ = 1 - victim_;
  Slot& s = slots_[victim_];
  victim_ = 1 - victim_;
  start_gather(unit, s);
  queue_.wait(s.ticket);
  return s;
}

void Zero3Params::start_gather(int unit, Slot& s) {
  const Zero3Unit& u = units_[static_cast<size_t>(unit)];
  const float* in = unit_shard(shard_params_, u);
  float* out = s.data;
  const auto n = static_cast<size_t>(u.layout.shard_size);
  s.unit = unit;
  sent_bytes_ += ring_allgather_sent(n * sizeof(float), dp_.size());
  s.ticket = queue_.submit([this, in, out, n] { dp_.allgather(in, out, n); });
}

void Zero3Params::prefetch(int unit, const Slot& keep) {
  for (const Slot& s : slots_) {
    if (s.unit == unit) return;
  }
  start_gather(unit, &slots_[0] == &keep ? slots_[1] : slots_[0]);
}

}  // namespace trainctl::parallel
