// ZeRO-3, whole flat buffers in and out of the shards: every parameter (or optimizer
// moment) gathered in the flat layout for checkpoints and the final export, and this
// rank's shard kept of a checkpoint's flat buffer.
#include "parallel/zero3_params.h"

#include <algorithm>

namespace trainctl::parallel {

std::vector<Zero3Params::OwnedRange> Zero3Params::owned_ranges() const {
  std::vector<OwnedRange> out;
  const int r = dp_.rank();
  for (const Zero3Unit& u : units_) {
    const int64_t b = u.layout.begin(r), e = u.layout.end(r);
    if (e > b) out.push_back({u.begin + b, u.begin + e, u.shard_pos});
  }
  return out;
}

std::vector<float> Zero3Params::gather_flat() { return gather_flat(shard_params_); }

std::vector<float> Zero3Params::gather_flat(const float* shard) {
  queue_.wait_all();
  std::vector<float> flat(static_cast<size_t>(gpt_.params().total()));
  std::vector<float> whole;
  for (const Zero3Unit& u : units_) {
    whole.resize(static_cast<size_t>(u.layout.padded_total()));
    dp_.allgather(shard + u.shard_pos, whole.data(), static_cast<size_t>(u.layout.shard_size));
    std::copy(whole.begin(), whole.begin() + (u.end - u.begin),
              flat.begin() + static_cast<std::ptrdiff_t>(u.begin));
  }
  return flat;
}

void Zero3Params::take_shard(const float* flat, float* shard) const {
  const int r = dp_.rank();
  for (const Zero3Unit& u : units_) {
    float* out = shard + u.shard_pos;
    std::fill(out, out + u.layout.shard_size, 0.0f);
    const int64_t b = u.layout.begin(r), e = u.layout.end(r);
    if (e > b) std::copy(flat + u.begin + b, flat + u.begin + e, out);
  }
}

void Zero3Params::load_flat(const float* flat) {
  queue_.wait_all();
  std::vector<float> shard(static_cast<size_t>(shard_floats_));
  take_shard(flat, shard.data());
  // Host-addressable backend memory, as the checkpoint reader assumes for the flat buffer.
  std::copy(shard.begin(), shard.end(), shard_params_);
  refresh();
}

}  // namespace trainctl::parallel
