#pragma once
// Where a model's activation and scratch buffers come from. Every part of the model
// (model/block.h) takes its buffers here, by purpose; with no backend the arena only counts,
// which is how `trainctl plan` models the memory of a model it never builds
// (gpt_memory_floats): the same calls, so the count is what the model allocates.
//
// Buffers wanted once per model rather than once per block and slot (backward scratch,
// what recomputation drops) are shared by key: every part asking for "attention.gqa.dqkv"
// gets the same buffer. A part names its own keys after its kind, so two kinds of block
// (a dense and an MoE feed-forward) never share scratch by accident, and parts of one kind
// share it by design. A later request may ask for fewer floats than the first, never more.
//
// Kept activations in 16 bits (precision.compute bf16/fp16; Megatron-LM's layout, issue 35):
// what a block keeps for its backward is asked for with keep(key, floats, slot). In fp32
// each (block, slot) gets a buffer of its own. In 16 bits the fp32 buffer under `key` is
// one per model, the block's working set while it runs, and each (block, slot) gets a
// 16-bit store of it: pack() after the block's forward, unpack() before its recompute and
// backward. The producers round every kept value to the 16-bit type as they write it
// (ModelContext::round_kept), so packing and unpacking are exact and recomputation still
// gives the bits of `none`. Norm statistics, log-sum-exp and MoE buffers stay fp32 (take()).
//
// The residual stream between blocks is kept the same way, with two differences
// (keep_output): block b's output is block b+1's input, so its fp32 working buffer must
// outlive block b+1's forward, and there are two of them, by the parity of the unit; and it
// is unpacked on its own (unpack_output), before the backward of the block that reads it.
// A chunk's input and its last block's output cross pipeline stages in their 16-bit stores
// (take_kept; Gpt::input_buffer, Gpt::forward_chunk), as Megatron-LM sends bf16.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ops/backend.h"
#include "util/dtype.h"

namespace trainctl::model {

// Floats a Gpt allocates through its backend, by purpose.
struct GptMemoryFloats {
  int64_t params = 0;       // the flat weight buffer (the gradient buffer is as large)
  int64_t activations = 0;  // what the `slots` micro-batches in flight keep, every chunk
  int64_t recompute = 0;    // the shared block buffers recomputation writes into
  int64_t workspace = 0;    // backward and head scratch shared by chunks and slots
                            // (and, in 16 bits, the kept activations' fp32 working set)
};

enum class MemoryUse { activations, recompute, workspace };

class ActivationArena {
 public:
  // backend null: count only (every pointer handed out is null). `kept`: the type keep()
  // stores activations in (fp32, or bf16/fp16 packed).
  explicit ActivationArena(ops::Backend* backend, DType kept = DType::fp32)
      : backend_(backend), kept_(kept) {}
  ~ActivationArena();
  ActivationArena(const ActivationArena&) = delete;
  ActivationArena& operator=(const ActivationArena&) = delete;

  // A buffer of its own.
  float* take(int64_t floats, MemoryUse use);
  // The model's one buffer named `key` (allocated by the first request). Throws
  // std::logic_error when a later request wants more floats or another purpose.
  float* shared(const std::string& key, int64_t floats, MemoryUse use);
  // The buffers of the next block (unit) asking for kept activations: later keep() calls
  // belong to it. Returns its index (0, 1, ... in call order). `output_leaves`: its
  // output is read by no backward (it leaves the pipeline stage): keep_output gives it the
  // working buffer of its parity alone, in fp32 and 16 bits alike.
  int begin_unit(bool output_leaves = false);
  // An activation the backward reads, of micro-batch `slot` of the current unit (see the
  // top of this file). `key` is one buffer of the unit (the same keys in every unit).
  float* keep(const std::string& key, int64_t floats, int slot);
  bool packs() const { return kept_ != DType::fp32; }
  // The current unit's output for micro-batch `slot` (see the top of this file): in 16 bits
  // the working buffer of the unit's parity, stored with the unit's pack().
  float* keep_output(int64_t floats, int slot);
  // A buffer of `floats` values of the kept type (16-bit stores, or fp32).
  void* take_kept(int64_t floats, MemoryUse use);
  // 16 bits: save the unit's working set and output of `slot` into their stores / fill the
  // working set back / fill the output's working buffer back. Nothing in fp32.
  void pack(int unit, int slot);
  void unpack(int unit, int slot) { unpack_where(unit, slot, false); }
  void unpack_output(int unit, int slot) { unpack_where(unit, slot, true); }
  DType kept() const { return kept_; }
  // What has been handed out so far (params left 0).
  const GptMemoryFloats& floats() const { return floats_; }

 private:
  struct Shared {
    float* data;
    int64_t floats;
    MemoryUse use;
  };
  struct Stored {
    float* working;  // the key's fp32 buffer
    void* bits;      // this (unit, slot)'s 16-bit copy
    int64_t floats;
    bool output = false;  // keep_output's: unpacked by unpack_output only
  };
  // Fills the working buffers of the unit's stores that are outputs (or are not).
  void unpack_where(int unit, int slot, bool outputs);
  // Registers the (current unit, slot) store of `working`.
  void store(float* working, int64_t floats, int slot, bool output);
  const std::vector<Stored>& stored(int unit, int slot) const;
  void* take_bytes(int64_t bytes, MemoryUse use);

  ops::Backend* backend_;
  DType kept_;
  std::vector<void*> owned_;
  std::vector<const float*> exact_;                      // working buffers noted matmul-exact
  std::vector<std::vector<std::vector<Stored>>> units_;  // [unit][slot]
  bool output_leaves_ = false;                           // of the current unit
  std::map<std::string, Shared> shared_;
  GptMemoryFloats floats_;
};

}  // namespace trainctl::model
