#pragma once
// ZeRO-3 (FSDP-style) parameter sharding for a GPT over the DP group.
//
// The flat parameter layout (model/parameters.h) is cut into units: one per transformer
// block, plus the "resident" units before the first block (wte, wpe) and after the last
// (ln_f, the tied LM head's copy of wte). Each unit is split evenly over the DP ranks
// (ShardLayout, padded); rank r keeps only its shard of every unit, parameters and
// gradients, so the persistent model state is ~1/dp of the replicated model's. The model
// is built with GptOptions::unbound_params and its storage is bound from here:
//   - a block's parameters are allgathered into one of two transient buffers just before
//     its forward and again before its backward (the block hooks); the next block of the
//     same chunk is prefetched into the other buffer on the communication thread
//     (CommQueue) while this one computes;
//   - a block's gradients accumulate in one of two transient buffers during its backward
//     and are reduce-scattered on the communication thread after it, every micro-batch;
//     this rank's part of the sum is added to its gradient shard;
//   - the resident units stay whole during the step (the embedding and the LM head are
//     used at both ends of it, like FSDP's root module): their parameters are allgathered
//     after each update, their gradients reduce-scattered once in finish_backward().
// The optimizer (Zero3AdamW, parallel/zero3_optimizer.h) updates the shards.
//
// Per optimizer step, on every rank of the DP group: begin_step(), the micro-batches'
// forward/backward passes (hooks), finish_backward(), then the optimizer on the shards and
// refresh(). All calls are collective over the DP group in that order.
#include <cstdint>
#include <utility>
#include <vector>

#include "comm/communicator.h"
#include "model/gpt.h"
#include "ops/backend.h"
#include "parallel/buckets.h"
#include "parallel/comm_queue.h"
#include "parallel/comm_stats.h"
#include "parallel/shard_layout.h"

namespace trainctl::parallel {

struct Zero3Unit {
  int64_t begin = 0, end = 0;  // range of the flat parameter layout
  ShardLayout layout;          // over the DP ranks
  int64_t shard_pos = 0;       // where this rank's shard of it starts in shard_params()
  bool resident = false;       // whole during the step (embedding / head); else a block
  int block = -1;              // the model's rank-local block index, for block units
};

// The units of the flat layout of a model shard declaring `specs` (gpt_param_specs), over
// `dp_size` ranks: every float in exactly one unit, in order; a block is the parameters
// named "transformer.h.<layer>.*", its unit running to the next block's start.
std::vector<Zero3Unit> zero3_units(const std::vector<model::ParamSpec>& specs, int dp_size);

// Floats a Zero3Params (with its Zero3AdamW) allocates for `units`, by purpose, without
// building one (`trainctl plan`; a unit test holds it equal to what is allocated).
struct Zero3MemoryFloats {
  int64_t shard = 0;      // parameters' shard (the gradients' shard and each moment as large)
  int64_t resident = 0;   // whole resident units' parameters, padded (their gradients as large)
  int64_t transient = 0;  // two gather and two gradient buffers of blocks, two reduced shards
};
Zero3MemoryFloats zero3_memory_floats(const std::vector<Zero3Unit>& units);

class Zero3Params {
 public:
  // Binds gpt's storage (gpt must be built with GptOptions::unbound_params) and connects
  // its block hooks (cleared again by the destructor). dp.size() >= 2.
  Zero3Params(comm::Communicator& dp, model::Gpt& gpt, ops::Backend& backend);
  ~Zero3Params();
  Zero3Params(const Zero3Params&) = delete;
  Zero3Params& operator=(const Zero3Params&) = delete;

  // GPT-2 initialisation, unit by unit: the shards hold the slices of the model that
  // gpt.init_weights(seed) would give an unsharded model.
  void init_weights(uint64_t seed);
  // Zeroes the gradient shards and the resident units' gradients.
  void begin_step();
  // Waits for every block's reduce-scatter and adds the last ones; reduce-scatters the
  // resident units' gradients. The DP communicator is free afterwards.
  void finish_backward();
  // After the shards changed (optimizer step, load): allgathers the resident units and
  // forgets the gathered blocks.
  void refresh();

  const std::vector<Zero3Unit>& units() const { return units_; }
  int64_t shard_floats() const { return shard_floats_; }
  float* shard_params() const { return shard_params_; }
  float* shard_grads() const { return shard_grads_; }
  // The flat ranges of the parameter layout this rank's shard holds, each with its
  // position in shard_params(): (flat begin, flat end, shard position).
  struct OwnedRange {
    int64_t begin, end, pos;
  };
  std::vector<OwnedRange> owned_ranges() const;

  // Every parameter, whole, in the flat layout (host memory; collective): for
  // checkpoints and the final export.
  std::vector<float> gather_flat();
  // Keeps this rank's shard of a whole flat parameter buffer (host memory), then refresh().
  void load_flat(const float* flat);
  // Allgathers a shard-shaped buffer (e.g. an optimizer moment) into the flat layout.
  std::vector<float> gather_flat(const float* shard);
  // This rank's shard of a flat buffer, into `shard` (shard_floats()).
  void take_shard(const float* flat, float* shard) const;

  // Communication since the last begin_step().
  StepCommStats stats() const;

 private:
  struct Slot {
    float* data = nullptr;
    int unit = -1;
    int64_t ticket = 0;
  };
  struct GradSlot {
    float* grads = nullptr;
    float* reduced = nullptr;  // this rank's shard of the sum, to add to the shard
    int unit = -1;             // pending: reduce-scatter of this unit not added yet
    int64_t ticket = 0;
  };
  void before_forward(int block);
  void before_backward(int block);
  void after_backward(int block);
  // Makes `unit` gathered in a slot (prefetched or now); returns the slot.
  Slot& gathered(int unit);
  void prefetch(int unit, const Slot& keep);
  void add_reduced(GradSlot& g);
  int unit_of_block(int block) const { return unit_of_block_.at(static_cast<size_t>(block)); }
  float* unit_shard(float* base, const Zero3Unit& u) const { return base + u.shard_pos; }

  comm::Communicator& dp_;
  model::Gpt& gpt_;
  ops::Backend& backend_;
  std::vector<Zero3Unit> units_;
  std::vector<int> unit_of_block_;
  int64_t shard_floats_ = 0;
  float* shard_params_ = nullptr;
  float* shard_grads_ = nullptr;
  std::vector<std::pair<float*, float*>> resident_;  // per unit: whole data, grads (or null)
  Slot slots_[2];
  GradSlot grad_slots_[2];
  int next_grad_slot_ = 0;
  int victim_ = 0;  // the slot a synchronous gather takes next
  std::vector<void*> buffers_;
  CommQueue queue_;  // last: its thread stops before the buffers go
};

}  // namespace trainctl::parallel
