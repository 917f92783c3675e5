#include "parallel/mixed_params.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>

namespace trainctl::parallel {

namespace {
constexpr size_t kHalf = 2;  // bytes of a 16-bit weight

int64_t largest_unit(const std::vector<Zero3Unit>& units) {
  int64_t largest = 0;
  for (const Zero3Unit& u : units) largest = std::max(largest, u.end - u.begin);
  return largest;
}

uint16_t* at(void* weights, int64_t index) { return static_cast<uint16_t*>(weights) + index; }

// What the backend hands out for `bytes`: whole 64-byte lines (ops/backend.h).
int64_t lines(int64_t bytes) { return (bytes + 63) / 64 * 64; }
}  // namespace

MixedParamsBytes mixed_params_bytes(const std::vector<model::ParamSpec>& specs, int dp_size,
                                    bool sharded) {
  const ShardLayout layout = make_shard_layout(model::flat_size(specs), sharded ? dp_size : 1);
  MixedParamsBytes b;
  b.weights = lines(layout.padded_total() * static_cast<int64_t>(kHalf));
  b.master = lines(layout.shard_size * static_cast<int64_t>(sizeof(float)));
  const std::vector<Zero3Unit> units = zero3_units(specs, 1);
  const int64_t companion = ResidentUnits::find(specs, units).companion_floats(units);
  b.widened = lines(largest_unit(units) * static_cast<int64_t>(sizeof(float))) +
              lines(companion * static_cast<int64_t>(sizeof(float)));
  if (sharded && dp_size > 1) b.staging = lines(layout.shard_size * static_cast<int64_t>(kHalf));
  return b;
}

MixedParams::MixedParams(model::Gpt& gpt, ops::Backend& backend, DType weights,
                         comm::Communicator& dp, bool sharded)
    : gpt_(gpt),
      backend_(backend),
      dtype_(weights),
      dp_(dp),
      sharded_(sharded && dp.size() > 1),
      layout_(make_shard_layout(gpt.params().total(), sharded_ ? dp.size() : 1)),
      units_(zero3_units(model::gpt_param_specs(gpt.config(), gpt.shard()), 1)),
      unit_of_block_(block_units(gpt, units_)),
      resident_(ResidentUnits::find(gpt, units_)) {
  if (weights != DType::bf16 && weights != DType::fp16) {
    throw std::invalid_argument("mixed precision keeps 16-bit weights: bf16 or fp16");
  }
  if (!gpt.params().bound() || gpt.params().grads() == nullptr) {
    throw std::invalid_argument("mixed precision needs a model built with GptOptions::grads_only");
  }
  weights_ = backend.alloc(static_cast<size_t>(layout_.padded_total()) * kHalf);
  master_ =
      static_cast<float*>(backend.alloc(static_cast<size_t>(layout_.shard_size) * sizeof(float)));
  if (sharded_) staging_ = backend.alloc(static_cast<size_t>(layout_.shard_size) * kHalf);
  // One buffer for the largest unit, one for what a use reads beside its largest (ln_f
  // beside the head, wpe beside wte): a block is read alone.
  slots_[0].capacity = largest_unit(units_);
  slots_[1].capacity = resident_.companion_floats(units_);
  for (Slot& s : slots_) {
    if (s.capacity > 0) {
      s.data = static_cast<float*>(backend.alloc(static_cast<size_t>(s.capacity) * sizeof(float)));
      // Widened 16-bit values: the products' rounding to the compute type is the identity
      // on them (init_weights' fp32 values pass through before any product runs).
      if (backend.matmul_dtype() == weights) {
        backend.note_matmul_exact(s.data, static_cast<size_t>(s.capacity));
      }
    }
  }
  auto block = [this](int b) { widened(unit_of_block_.at(static_cast<size_t>(b))); };
  gpt.set_block_hooks(
      {block, block, nullptr,
       [this](model::Gpt::ResidentUse use, bool grads) { before_resident(use, grads); }, nullptr});
}

MixedParams::~MixedParams() {
  gpt_.set_block_hooks({});
  for (Slot& s : slots_) {
    if (s.data == nullptr) continue;
    backend_.forget_matmul_exact(s.data);
    backend_.free(s.data);
  }
  backend_.free(weights_);
  backend_.free(master_);
  if (staging_ != nullptr) backend_.free(staging_);
}

int64_t MixedParams::master_begin() const { return layout_.begin(sharded_ ? dp_.rank() : 0); }
int64_t MixedParams::master_end() const { return layout_.end(sharded_ ? dp_.rank() : 0); }

MixedParams::Slot& MixedParams::widened(int unit, const Slot* keep) {
  const Zero3Unit& u = units_.at(static_cast<size_t>(unit));
  const int64_t n = u.end - u.begin;
  Slot* slot = nullptr;
  for (Slot& s : slots_) {
    if (s.unit == unit) slot = &s;
  }
  if (slot == nullptr) {
    // Best fit: the smaller buffer that holds the unit (never `keep`), so a small unit
    // leaves the large one's contents for its next use.
    for (Slot& s : slots_) {
      if (&s == keep || s.capacity < n) continue;
      if (slot == nullptr || s.capacity < slot->capacity ||
          (s.capacity == slot->capacity && s.used < slot->used)) {
        slot = &s;
      }
    }
    if (slot == nullptr) throw std::logic_error("mixed precision: no buffer fits a unit");
    backend_.cast(slot->data, DType::fp32, at(weights_, u.begin), dtype_, static_cast<size_t>(n));
    slot->unit = unit;
  }
  slot->used = ++uses_;
  gpt_.params().bind_data(u.begin, u.end, slot->data);
  return *slot;
}

void MixedParams::before_resident(model::Gpt::ResidentUse use, bool grads) {
  // Gradients stay in the flat buffer: only what the use reads is widened.
  const Slot* keep = nullptr;
  for (const int unit : resident_.of(use, grads).first) keep = &widened(unit, keep);
}

void MixedParams::init_weights(uint64_t seed) {
  // One unit at a time through a widening buffer: never the whole model in fp32 at once.
  model::ParameterSet& params = gpt_.params();
  const int64_t begin = master_begin(), end = master_end();
  float* whole = slots_[0].data;
  for (const Zero3Unit& u : units_) {
    const auto n = static_cast<size_t>(u.end - u.begin);
    backend_.zero(whole, n);
    params.bind_data(u.begin, u.end, whole);
    params.initialize(seed, u.begin, u.end);
    backend_.cast(at(weights_, u.begin), dtype_, whole, DType::fp32, n);
    const int64_t lo = std::max(begin, u.begin), hi = std::min(end, u.end);
    if (hi > lo) {
      backend_.copy(master_ + (lo - begin), whole + (lo - u.begin), static_cast<size_t>(hi - lo));
    }
  }
  for (Slot& s : slots_) s.unit = -1;
}

void MixedParams::publish() {
  stats_ = {};
  for (Slot& s : slots_) s.unit = -1;
  const int64_t begin = master_begin();
  const auto owned = static_cast<size_t>(master_end() - begin);
  if (!sharded_) {
    backend_.cast(at(weights_, begin), dtype_, master_, DType::fp32, owned);
    return;
  }
  // The allgather moves 16-bit values: each rank's shard travels as half as many floats
  // (shards are whole 64-byte lines, so the count is exact).
  const auto shard = static_cast<size_t>(layout_.shard_size);
  backend_.cast(staging_, dtype_, master_, DType::fp32, owned);
  // The staging tail past `owned` (padding) was zeroed at allocation and is never written.
  const auto t0 = std::chrono::steady_clock::now();
  dp_.allgather(static_cast<const float*>(staging_), static_cast<float*>(weights_), shard / 2);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  stats_.comm_s += s;
  stats_.exposed_s += s;
  stats_.collectives += 1;
  stats_.wire_bytes += shard * kHalf;
  stats_.sent_bytes += ring_allgather_sent(shard * kHalf, dp_.size());
}

std::vector<float> MixedParams::gather_master() {
  const auto shard = static_cast<size_t>(layout_.shard_size);
  std::vector<float> whole(static_cast<size_t>(layout_.padded_total()));
  if (sharded_) {
    dp_.allgather(master_, whole.data(), shard);
  } else {
    backend_.copy(whole.data(), master_, shard);
  }
  whole.resize(static_cast<size_t>(layout_.total));
  return whole;
}

void MixedParams::load_master(const float* whole) {
  const int64_t begin = master_begin(), end = master_end();
  backend_.copy(master_, whole + begin, static_cast<size_t>(end - begin));
  publish();
}

}  // namespace trainctl::parallel
