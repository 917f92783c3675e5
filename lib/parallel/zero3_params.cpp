#include "parallel/zero3_params.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace trainctl::parallel {

Zero3Params::Zero3Params(comm::Communicator& dp, model::Gpt& gpt, ops::Backend& backend)
    : dp_(dp),
      gpt_(gpt),
      backend_(backend),
      units_(zero3_units(model::gpt_param_specs(gpt.config(), gpt.shard()), dp.size())),
      unit_of_block_(block_units(gpt, units_)),
      resident_(ResidentUnits::find(gpt, units_)) {
  if (dp.size() < 2) throw std::invalid_argument("ZeRO-3 needs a DP group of 2 or more ranks");
  if (!gpt.params().bound()) {
    throw std::invalid_argument("ZeRO-3 needs a model built with GptOptions::unbound_params");
  }
  allocate_buffers();
  gpt.set_block_hooks(
      {[this](int b) { before_forward(b); }, [this](int b) { before_backward(b); },
       [this](int b) { after_backward(b); },
       [this](model::Gpt::ResidentUse use, bool grads) { before_resident(use, grads); },
       [this](model::Gpt::ResidentUse use, bool grads) { after_resident(use, grads); }});
}

void Zero3Params::allocate_buffers() {
  auto alloc = [&](int64_t floats) {
    void* p = backend_.alloc(static_cast<size_t>(floats) * sizeof(float));
    buffers_.push_back(p);
    return static_cast<float*>(p);
  };
  for (const Zero3Unit& u : units_) shard_floats_ += u.layout.shard_size;
  shard_params_ = alloc(shard_floats_);
  shard_grads_ = alloc(shard_floats_);
  backend_.zero(shard_params_, static_cast<size_t>(shard_floats_));
  backend_.zero(shard_grads_, static_cast<size_t>(shard_floats_));
  // The transient buffers hold the largest unit whole (padded), or its shard of the sum.
  int64_t largest = 0;
  for (const Zero3Unit& u : units_) largest = std::max(largest, u.layout.padded_total());
  if (largest > 0) {
    const int64_t reduced = largest / dp_.size();
    for (Slot& s : slots_) s.data = alloc(largest);
    for (GradSlot& g : grad_slots_) {
      g.grads = alloc(largest);
      g.reduced = alloc(reduced);
    }
  }
}

Zero3Params::~Zero3Params() {
  gpt_.set_block_hooks({});
  try {
    queue_.wait_all();
  } catch (...) {  // the group failed: the error was reported where it was waited for
  }
  for (void* p : buffers_) backend_.free(p);
}

void Zero3Params::init_weights(uint64_t seed) {
  // One unit at a time through a gather buffer (or the resident buffer): never the whole
  // model at once.
  model::ParameterSet& params = gpt_.params();
  const int r = dp_.rank();
  for (size_t i = 0; i < units_.size(); ++i) {
    const Zero3Unit& u = units_[i];
    float* whole = slots_[0].data;
    backend_.zero(whole, static_cast<size_t>(u.layout.padded_total()));
    params.bind(u.begin, u.end, whole, nullptr);
    params.initialize(seed, u.begin, u.end);
    const int64_t n = u.layout.end(r) - u.layout.begin(r);
    float* shard = unit_shard(shard_params_, u);
    backend_.zero(shard, static_cast<size_t>(u.layout.shard_size));
    if (n > 0) backend_.copy(shard, whole + u.layout.begin(r), static_cast<size_t>(n));
  }
  for (Slot& s : slots_) s.unit = -1;
}

void Zero3Params::begin_step() {
  queue_.wait_all();
  queue_.reset_times();
  sent_bytes_ = 0;
  for (GradSlot& g : grad_slots_) add_reduced(g);
  backend_.zero(shard_grads_, static_cast<size_t>(shard_floats_));
}

void Zero3Params::before_forward(int block) {
  const int unit = unit_of_block(block);
  Slot& s = gathered(unit);
  const Zero3Unit& u = units_[static_cast<size_t>(unit)];
  gpt_.params().bind(u.begin, u.end, s.data, nullptr);
  const int next = block + 1;
  if (next < gpt_.num_blocks() && gpt_.chunk_of_block(next) == gpt_.chunk_of_block(block)) {
    prefetch(unit_of_block(next), s);
  }
}

void Zero3Params::before_backward(int block) {
  const int unit = unit_of_block(block);
  Slot& s = gathered(unit);
  const Zero3Unit& u = units_[static_cast<size_t>(unit)];
  GradSlot& g = grad_slot(unit);
  gpt_.params().bind(u.begin, u.end, s.data, g.grads);
  const int prev = block - 1;
  if (prev >= 0 && gpt_.chunk_of_block(prev) == gpt_.chunk_of_block(block)) {
    prefetch(unit_of_block(prev), s);
  }
}

void Zero3Params::after_backward(int block) { release_grads(unit_of_block(block)); }

void Zero3Params::before_resident(model::Gpt::ResidentUse use, bool grads) {
  const auto [read, written] = resident_.of(use, grads);
  model::ParameterSet& params = gpt_.params();
  const Slot* keep = nullptr;
  for (const int unit : read) {
    const Slot& s = gathered(unit, keep);
    keep = &s;
    const Zero3Unit& u = units_[static_cast<size_t>(unit)];
    params.bind(u.begin, u.end, s.data, nullptr);
  }
  for (const int unit : written) {
    GradSlot& g = grad_slot(unit);
    float* data = nullptr;
    for (const Slot& s : slots_) {
      if (s.unit == unit && std::find(read.begin(), read.end(), unit) != read.end()) data = s.data;
    }
    const Zero3Unit& u = units_[static_cast<size_t>(unit)];
    params.bind(u.begin, u.end, data, g.grads);
  }
}

void Zero3Params::after_resident(model::Gpt::ResidentUse use, bool grads) {
  for (const int unit : resident_.of(use, grads).second) release_grads(unit);
}

void Zero3Params::refresh() {
  queue_.wait_all();
  for (Slot& s : slots_) s.unit = -1;
}

StepCommStats Zero3Params::stats() const {
  const CommQueue::Times t = queue_.times();
  StepCommStats s;
  s.comm_s = t.busy_s;
  s.exposed_s = t.waited_s;
  s.collectives = t.tasks;
  s.sent_bytes = sent_bytes_;
  return s;
}

}  // namespace trainctl::parallel
