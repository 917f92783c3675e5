#include "parallel/zero3_params.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace trainctl::parallel {

Zero3Params::Zero3Params(comm::Communicator& dp, model::Gpt& gpt, ops::Backend& backend)
    : dp_(dp),
      gpt_(gpt),
      backend_(backend),
      units_(zero3_units(model::gpt_param_specs(gpt.config(), gpt.shard()), dp.size())) {
  if (dp.size() < 2) throw std::invalid_argument("ZeRO-3 needs a DP group of 2 or more ranks");
  if (!gpt.params().bound()) {
    throw std::invalid_argument("ZeRO-3 needs a model built with GptOptions::unbound_params");
  }
  map_block_units();
  find_resident_units();
  allocate_buffers();
  gpt.set_block_hooks(
      {[this](int b) { before_forward(b); }, [this](int b) { before_backward(b); },
       [this](int b) { after_backward(b); },
       [this](model::Gpt::ResidentUse use, bool grads) { before_resident(use, grads); },
       [this](model::Gpt::ResidentUse use, bool grads) { after_resident(use, grads); }});
}

void Zero3Params::map_block_units() {
  unit_of_block_.assign(static_cast<size_t>(gpt_.num_blocks()), -1);
  for (size_t i = 0; i < units_.size(); ++i) {
    const Zero3Unit& u = units_[i];
    if (u.resident) continue;
    // The units come from the specs; the hooks from the model: they must agree.
    if (u.block >= gpt_.num_blocks() || gpt_.block_param_range(u.block).first != u.begin ||
        gpt_.block_param_range(u.block).second > u.end) {
      throw std::logic_error("ZeRO-3: the model's blocks do not match its parameter layout");
    }
    unit_of_block_[static_cast<size_t>(u.block)] = static_cast<int>(i);
  }
}

void Zero3Params::find_resident_units() {
  const model::ParameterSet& params = gpt_.params();
  auto unit_at = [&](int64_t offset) {
    for (size_t i = 0; i < units_.size(); ++i) {
      if (units_[i].begin <= offset && offset < units_[i].end) return static_cast<int>(i);
    }
    throw std::logic_error("ZeRO-3: a parameter outside every unit");
  };
  for (const model::Param& p : params.list()) {
    const bool embedding =
        p.name == "transformer.wte.weight" || p.name == "model.embed_tokens.weight";
    if (embedding && !p.tied_copy) wte_unit_ = unit_at(p.offset);
    if (p.name == "transformer.wpe.weight") wpe_unit_ = unit_at(p.offset);  // llama has none
    if (p.name == "transformer.ln_f.weight" || p.name == "model.norm.weight") {
      lnf_unit_ = unit_at(p.offset);
    }
  }
  if (gpt_.tied_embedding_param() >= 0) {
    tied_unit_ = unit_at(params.at(static_cast<size_t>(gpt_.tied_embedding_param())).offset);
  }
  // The LM head reads the tied embedding (GPT, tied llama) or its own lm_head.
  if (gpt_.head_weight() >= 0) {
    head_unit_ = unit_at(params.at(static_cast<size_t>(gpt_.head_weight())).offset);
  }
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

std::pair<std::vector<int>, std::vector<int>> Zero3Params::resident_units(
    model::Gpt::ResidentUse use, bool grads) const {
  using Use = model::Gpt::ResidentUse;
  std::vector<int> read, written;
  auto add = [](std::vector<int>& v, int unit) {
    if (unit < 0) throw std::logic_error("ZeRO-3: a resident use of a unit this rank lacks");
    if (std::find(v.begin(), v.end(), unit) == v.end()) v.push_back(unit);
  };
  switch (use) {
    case Use::embedding_forward:
      add(read, wte_unit_);
      if (wpe_unit_ >= 0) add(read, wpe_unit_);
      break;
    case Use::head_forward:
      add(read, lnf_unit_);
      add(read, head_unit_);
      if (grads) add(written, head_unit_);
      break;
    case Use::head_backward:
      add(read, lnf_unit_);
      add(written, lnf_unit_);
      break;
    case Use::embedding_backward:  // reads no parameter
      add(written, wte_unit_);
      if (wpe_unit_ >= 0) add(written, wpe_unit_);
      break;
  }
  return {read, written};
}

void Zero3Params::before_resident(model::Gpt::ResidentUse use, bool grads) {
  const auto [read, written] = resident_units(use, grads);
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
  for (const int unit : resident_units(use, grads).second) release_grads(unit);
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
