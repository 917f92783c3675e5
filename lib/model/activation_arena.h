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
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ops/backend.h"

namespace trainctl::model {

// Floats a Gpt allocates through its backend, by purpose.
struct GptMemoryFloats {
  int64_t params = 0;       // the flat weight buffer (the gradient buffer is as large)
  int64_t activations = 0;  // what the `slots` micro-batches in flight keep, every chunk
  int64_t recompute = 0;    // the shared block buffers recomputation writes into
  int64_t workspace = 0;    // backward and head scratch shared by chunks and slots
};

enum class MemoryUse { activations, recompute, workspace };

class ActivationArena {
 public:
  // backend null: count only (every pointer handed out is null).
  explicit ActivationArena(ops::Backend* backend) : backend_(backend) {}
  ~ActivationArena();
  ActivationArena(const ActivationArena&) = delete;
  ActivationArena& operator=(const ActivationArena&) = delete;

  // A buffer of its own.
  float* take(int64_t floats, MemoryUse use);
  // The model's one buffer named `key` (allocated by the first request). Throws
  // std::logic_error when a later request wants more floats or another purpose.
  float* shared(const std::string& key, int64_t floats, MemoryUse use);
  // What has been handed out so far (params left 0).
  const GptMemoryFloats& floats() const { return floats_; }

 private:
  struct Shared {
    float* data;
    int64_t floats;
    MemoryUse use;
  };
  ops::Backend* backend_;
  std::vector<void*> owned_;
  std::map<std::string, Shared> shared_;
  GptMemoryFloats floats_;
};

}  // namespace trainctl::model
