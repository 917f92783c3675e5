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
  if (block_begin.empty()) {
    add(0, total, true, -1);
    return units;
  }
  add(0, block_begin.front(), true, -1);
  const int blocks = static_cast<int>(block_begin.size());
  for (int b = 0; b < blocks; ++b) {
    const auto k = static_cast<size_t>(b);
    add(block_begin[k], b + 1 < blocks ? block_begin[k + 1] : after_blocks, false, b);
  }
  add(after_blocks, total, true, -1);
  return units;
}

Zero3MemoryFloats zero3_memory_floats(const std::vector<Zero3Unit>& units) {
  Zero3MemoryFloats m;
  int64_t largest = 0;
  for (const Zero3Unit& u : units) {
    m.shard += u.layout.shard_size;
    if (u.resident) {
      m.resident += u.layout.padded_total();
    } else {
      largest = std::max(largest, u.layout.padded_total());
    }
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
    if (!u.resident) {
      // The units come from the specs; the hooks from the model: they must agree.
      if (u.block >= gpt.num_blocks() || gpt.block_param_range(u.block).first != u.begin ||
          gpt.block_param_range(u.block).second > u.end) {
        throw std::logic_error("ZeRO-3: the model's blocks do not match its parameter layout");
      }
      unit_of_block_[static_cast<size_t>(u.block)] = static_cast<int>(i);
      largest = std::max(largest, u.layout.padded_total());
    }
  }
  shard_params_ = alloc(shard_floats_);
  shard_grads_ = alloc(shard_floats_);
  backend_.zero(shard_params_, static_cast<size_t>(shard_floats_));
  backend_.zero(shard_grads_, static_cast<size_t>(shard_floats_));
  resident_.assign(units_.size(), {nullptr, nullptr});
  for (size_t i = 0; i < units_.size(); ++i) {
    const Zero3Unit& u = units_[i];
    if (!u.resident) continue;
    // Padded: the allgather writes whole shards.
    resident_[i] = {alloc(u.layout.padded_total()), alloc(u.layout.padded_total())};
    backend_.zero(resident_[i].second, static_cast<size_t>(u.layout.padded_total()));
    gpt.params().bind(u.begin, u.end, resident_[i].first, resident_[i].second);
  }
  if (largest > 0) {
    const int64_t reduced = largest / dp.size();
    for (Slot& s : slots_) s.data = alloc(largest);
    for (GradSlot& g : grad_slots_) {
      g.grads = alloc(largest);
      g.reduced = alloc(reduced);
    }
  }
  gpt.set_block_hooks({[this](int b) { before_forward(b); }, [this](int b) { before_backward(b); },
                       [this](int b) { after_backward(b); }});
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
    float* whole = u.resident ? resident_[i].first : slots_[0].data;
    backend_.zero(whole, static_cast<size_t>(u.layout.padded_total()));
    params.bind(u.begin, u.end, whole, nullptr);
    params.initialize(seed, u.begin, u.end);
    if (u.resident) params.bind(u.begin, u.end, whole, resident_[i].second);
    const int64_t n = u.layout.end(r) - u.layout.begin(r);
    float* shard = unit_shard(shard_params_, u);
    backend_.zero(shard, static_cast<size_t>(u.layout.shard_size));
    if (n > 0) backend_.copy(shard, whole + u.layout.begin(r), static_cast<size_t>(n));
  }
  slots_[0].unit = -1;
}

void Zero3Params::begin_step() {
  queue_.wait_all();
  queue_.reset_times();
  for (GradSlot& g : grad_slots_) add_reduced(g);
  backend_.zero(shard_grads_, static_cast<size_t>(shard_floats_));
  for (size_t i = 0; i < units_.size(); ++i) {
    if (units_[i].resident) {
      backend_.zero(resident_[i].second, static_cast<size_t>(units_[i].layout.padded_total()));
    }
  }
}

Zero3Params::Slot& Zero3Params::gathered(int unit) {
  for (Slot& s : slots_) {
    if (s.unit == unit) {
      queue_.wait(s.ticket);
      return s;
    }
  }
  // No slot is in use by a computation between hooks: take them in turn.
  Slot& s = slots_[victim_];
  victim_ = 1 - victim_;
  const Zero3Unit& u = units_[static_cast<size_t>(unit)];
  const float* in = unit_shard(shard_params_, u);
  float* out = s.data;
  const auto n = static_cast<size_t>(u.layout.shard_size);
  s.unit = unit;
  s.ticket = queue_.submit([this, in, out, n] { dp_.allgather(in, out, n); });
  queue_.wait(s.ticket);
  return s;
}

void Zero3Params::prefetch(int unit, const Slot& keep) {
  for (const Slot& s : slots_) {
    if (s.unit == unit) return;
  }
  Slot& s = &slots_[0] == &keep ? slots_[1] : slots_[0];
  const Zero3Unit& u = units_[static_cast<size_t>(unit)];
  const float* in = unit_shard(shard_params_, u);
  float* out = s.data;
  const auto n = static_cast<size_t>(u.layout.shard_size);
  s.unit = unit;
  s.ticket = queue_.submit([this, in, out, n] { dp_.allgather(in, out, n); });
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
  GradSlot& g = grad_slots_[next_grad_slot_];
  next_grad_slot_ = 1 - next_grad_slot_;
  if (g.unit >= 0) {
    queue_.wait(g.ticket);
    add_reduced(g);
  }
  backend_.zero(g.grads, static_cast<size_t>(u.layout.padded_total()));
  g.unit = unit;
  g.ticket = 0;
  gpt_.params().bind(u.begin, u.end, s.data, g.grads);
  const int prev = block - 1;
  if (prev >= 0 && gpt_.chunk_of_block(prev) == gpt_.chunk_of_block(block)) {
    prefetch(unit_of_block(prev), s);
  }
}

void Zero3Params::after_backward(int block) {
  const int unit = unit_of_block(block);
  for (GradSlot& g : grad_slots_) {
    if (g.unit != unit || g.ticket != 0) continue;
    const float* in = g.grads;
    float* out = g.reduced;
    const auto n = static_cast<size_t>(units_[static_cast<size_t>(unit)].layout.shard_size);
    g.ticket = queue_.submit([this, in, out, n] { dp_.reduce_scatter(in, out, n); });
    return;
  }
  throw std::logic_error("ZeRO-3: a block's backward ended that never began");
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
  for (size_t i = 0; i < units_.size(); ++i) {
    const Zero3Unit& u = units_[i];
    if (!u.resident) continue;
    const auto n = static_cast<size_t>(u.layout.shard_size);
    const float* in = resident_[i].second;  // zero past the unit's end (begin_step)
    float* out = unit_shard(shard_grads_, u);
    queue_.submit([this, in, out, n] { dp_.reduce_scatter(in, out, n); });
  }
  queue_.wait_all();
}

void Zero3Params::refresh() {
  queue_.wait_all();
  for (Slot& s : slots_) s.unit = -1;
  for (size_t i = 0; i < units_.size(); ++i) {
    const Zero3Unit& u = units_[i];
    if (!u.resident) continue;
    const float* in = unit_shard(shard_params_, u);
    float* out = resident_[i].first;
    const auto n = static_cast<size_t>(u.layout.shard_size);
    queue_.submit([this, in, out, n] { dp_.allgather(in, out, n); });
  }
  queue_.wait_all();
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
  return s;
}

}  // namespace trainctl::parallel
