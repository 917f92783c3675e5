#include "parallel/zero3_units.h"

#include <algorithm>
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

}  // namespace trainctl::parallel
