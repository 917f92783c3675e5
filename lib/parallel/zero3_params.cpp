#include "parallel/zero3_params.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace trainctl::parallel {

namespace {
constexpr int64_t kAlignFloats = 16;  // parameters start on 64-byte lines (parameters.h)
int64_t align_up(int64_t n) { return (n + kAlignFloats - 1) / kAlignFloats * kAlignFloats; }

// The layer of a block parameter ("transformer.h.<layer>.*", llama's
// "model.layers.<layer>.*"), else -1.
int block_layer(const std::string& name) {
  for (const char* prefix : {"transformer.h.", "model.layers."}) {
    const std::string p = prefix;
    if (name.rfind(p, 0) == 0) return std::stoi(name.substr(p.size()));
  }
  return -1;
}
}  // namespace

std::vector<Zero3Unit> zero3_units(const std::vector<model::ParamSpec>& specs, int dp_size) {
  std::vector<Zero3Unit> units;
  int64_t pos = 0;
  auto add = [&](int64_t begin, int64_t end, bool resident, int block) {
    if (end <= begin) return;
    Zero3Unit u;
    u.begin = begin;
    u.end = end;
    u.layout = make_shard_layout(end - begin, dp_size);
    u.shard_pos = pos;
    u.resident = resident;
    u.block = block;
    pos += u.layout.shard_size;
    units.push_back(u);
  };
  const int64_t total = model::flat_size(specs);
  const std::vector<int64_t> offsets = model::flat_offsets(specs);
  // Cut points: where each block starts, and where what follows the last block starts.
  std::vector<int64_t> block_begin;
  int64_t after_blocks = -1;
  int layer = -1;
  for (size_t i = 0; i < specs.size(); ++i) {
    const int l = block_layer(specs[i].name);
    if (l >= 0 && l != layer) block_begin.push_back(offsets[i]);
    if (l >= 0) after_blocks = align_up(offsets[i] + numel_of(specs[i].shard.local_shape()));
    layer = l;
  }
  // Outside the blocks every parameter is a unit of its own (wte, wpe, the tied copy), but
  // ln_f's weight and bias share one: a use never needs more than two units at once.
  auto add_resident = [&](int64_t begin, int64_t end) {
    int64_t from = begin;
    for (size_t i = 0; i < specs.size(); ++i) {
      if (offsets[i] <= from || offsets[i] >= end) continue;
      if (specs[i].name == "transformer.ln_f.bias") continue;
      add(from, offsets[i], true, -1);
      from = offsets[i];
    }
    add(from, end, true, -1);
  };
  if (block_begin.empty()) {
    add_resident(0, total);
    return units;
  }
  add_resident(0, block_begin.front());
  const int blocks = static_cast<int>(block_begin.size());
  for (int b = 0; b < blocks; ++b) {
    const auto k = static_cast<size_t>(b);
    add(block_begin[k], b + 1 < blocks ? block_begin[k + 1] : after_blocks, false, b);
  }
  add_resident(after_blocks, total);
  return units;
}

Zero3MemoryFloats zero3_memory_floats(const std::vector<Zero3Unit>& units) {
  Zero3MemoryFloats m;
  int64_t largest = 0;
  for (const Zero3Unit& u : units) {
    m.shard += u.layout.shard_size;
    largest = std::max(largest, u.layout.padded_total());
  }
  if (largest > 0) {
    // Two gather buffers, two gradient buffers and their two reduced shards.
    m.transient = 4 * largest + 2 * (largest / units.front().layout.ranks);
  }
  return m;
}

Zero3Params::Zero3Params(comm::Communicator& dp, model::Gpt& gpt, ops::Backend& backend)
    : dp_(dp),
      gpt_(gpt),
      backend_(backend),
      units_(zero3_units(model::gpt_param_specs(gpt.config(), gpt.shard()), dp.size())) {
  if (dp.size() < 2) throw std::invalid_argument("ZeRO-3 needs a DP group of 2 or more ranks");
  if (!gpt.params().bound()) {
    throw std::invalid_argument("ZeRO-3 needs a model built with GptOptions::unbound_params");
  }
  auto alloc = [&](int64_t floats) {
    void* p = backend_.alloc(static_cast<size_t>(floats) * sizeof(float));
    buffers_.push_back(p);
    return static_cast<float*>(p);
  };
  unit_of_block_.assign(static_cast<size_t>(gpt.num_blocks()), -1);
  int64_t largest = 0;
  for (size_t i = 0; i < units_.size(); ++i) {
    const Zero3Unit& u = units_[i];
    shard_floats_ += u.layout.shard_size;
    largest = std::max(largest, u.layout.padded_total());
    if (!u.resident) {
      // The units come from the specs; the hooks from the model: they must agree.
      if (u.block >= gpt.num_blocks() || gpt.block_param_range(u.block).first != u.begin ||
          gpt.block_param_range(u.block).second > u.end) {
        throw std::logic_error("ZeRO-3: the model's blocks do not match its parameter layout");
      }
      unit_of_block_[static_cast<size_t>(u.block)] = static_cast<int>(i);
    }
  }
  // The resident parameters' units.
  const model::ParameterSet& params = gpt.params();
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
  if (gpt.tied_embedding_param() >= 0) {
    tied_unit_ = unit_at(params.at(static_cast<size_t>(gpt.tied_embedding_param())).offset);
  }
  // The LM head reads the tied embedding (GPT, tied llama) or its own lm_head.
  if (gpt.head_weight() >= 0) {
    head_unit_ = unit_at(params.at(static_cast<size_t>(gpt.head_weight())).offset);
  }
  shard_params_ = alloc(shard_floats_);
  shard_grads_ = alloc(shard_floats_);
  backend_.zero(shard_params_, static_cast<size_t>(shard_floats_));
  backend_.zero(shard_grads_, static_cast<size_t>(shard_floats_));
  if (largest > 0) {
    const int64_t reduced = largest / dp.size();
    for (Slot& s : slots_) s.data = alloc(largest);
    for (GradSlot& g : grad_slots_) {
      g.grads = alloc(largest);
      g.reduced = alloc(reduced);
    }
  }
  gpt.set_block_hooks(
      {[this](int b) { before_forward(b); }, [this](int b) { before_backward(b); },
       [this](int b) { after_backward(b); },
       [this](model::Gpt::ResidentUse use, bool grads) { before_resident(use, grads); },
       [this](model::Gpt::ResidentUse use, bool grads) { after_resident(use, grads); }});
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

void Zero3Params::prefetch(int unit, const Slot& keep) {
  for (const Slot& s : slots_) {
    if (s.unit == unit) return;
  }
  start_gather(unit, &slots_[0] == &keep ? slots_[1] : slots_[0]);
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

void Zero3Params::refresh() {
  queue_.wait_all();
  for (Slot& s : slots_) s.unit = -1;
}

std::pair<float*, int64_t> Zero3Params::tied_embedding_grad_shard() {
  finish_backward();
  if (tied_unit_ < 0) return {nullptr, 0};
  const Zero3Unit& u = units_[static_cast<size_t>(tied_unit_)];
  return {unit_shard(shard_grads_, u), u.layout.shard_size};
}

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
