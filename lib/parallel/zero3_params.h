#pragma once
// ZeRO-3 (FSDP-style) parameter sharding for a GPT over the DP group.
//
// The flat parameter layout (model/parameters.h) is cut into units: one per transformer
// block, plus the "resident" units before the first block (wte, wpe: one each) and after
// the last (ln_f; the tied LM head's copy of wte on its own, the same size as wte's unit
// on the first stage). Each unit is split evenly over the DP ranks (ShardLayout, padded);
// rank r keeps only its shard of every unit, parameters and gradients, so the persistent
// model state is ~1/dp of the replicated model's. The model is built with
// GptOptions::unbound_params and its storage is bound from here:
//   - a block's parameters are allgathered into one of two transient buffers just before
//     its forward and again before its backward (the block hooks); the next block of the
//     same chunk is prefetched into the other buffer on the communication thread
//     (CommQueue) while this one computes;
//   - a block's gradients accumulate in one of two transient buffers during its backward
//     and are reduce-scattered on the communication thread after it, every micro-batch;
//     this rank's part of the sum is added to its gradient shard;
//   - the embedding and head units go through the same buffers around each use (the
//     resident hooks): wte and wpe are gathered for the embedding forward, ln_f and the
//     tied embedding for the head forward and ln_f again for the head's backward; the
//     gradients each use makes (the head's share of the tied embedding, ln_f's, the
//     embedding backward's) are reduce-scattered right after it, per micro-batch. No unit
//     stays whole between uses, so the buffers are sized by the largest unit of all and
//     nothing but the shards persists across the step.
// The optimizer (Zero3AdamW, parallel/zero3_optimizer.h) updates the shards.
//
// The mechanism, by responsibility: zero3_params.cpp builds and binds, and decides in the
// hooks what each use of the model needs; zero3_gather.cpp gathers units into the
// transient buffers; zero3_reduce.cpp reduce-scatters the gradients into the shards;
// zero3_checkpoint.cpp moves whole flat buffers in and out (checkpoints, export); the
// units themselves are zero3_units.h's.
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
#include "parallel/resident_units.h"
#include "parallel/shard_layout.h"
#include "parallel/zero3_units.h"

namespace trainctl::parallel {

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
  // Zeroes the gradient shards.
  void begin_step();
  // Waits for every unit's reduce-scatter and adds the last ones. The DP communicator is
  // free afterwards.
  void finish_backward();
  // After the shards changed (optimizer step, load): forgets the gathered units.
  void refresh();
  // This rank's shard of the tied embedding's summed gradient (wte's unit, or the head's
  // copy's: with pp > 1 both ends shard it alike), after finish_backward() (called here);
  // {nullptr, 0} when the model holds neither. For the pipeline's tied-embedding exchange.
  std::pair<float*, int64_t> tied_embedding_grad_shard();

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
  void allocate_buffers();
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
  void before_resident(model::Gpt::ResidentUse use, bool grads);
  void after_resident(model::Gpt::ResidentUse use, bool grads);
  // Makes `unit` gathered in a slot (prefetched or now), never in `keep`; returns the slot.
  Slot& gathered(int unit, const Slot* keep = nullptr);
  // Takes the next gradient slot for `unit` (adding what it held), zeroed.
  GradSlot& grad_slot(int unit);
  // Starts the reduce-scatter of `unit`'s gradient slot.
  void release_grads(int unit);
  void prefetch(int unit, const Slot& keep);
  // Submits the allgather of `unit` into slot `s` on the communication thread.
  void start_gather(int unit, Slot& s);
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
  ResidentUnits resident_;  // units of the embedding and head parameters on this rank
  Slot slots_[2];
  GradSlot grad_slots_[2];
  int next_grad_slot_ = 0;
  int victim_ = 0;  // the slot a synchronous gather takes next
  std::vector<void*> buffers_;
  // Ring-schedule bytes this rank sent for gathers and reduce-scatters since begin_step
  // (metrics' comm_bytes; parallel/comm_stats.h).
  size_t sent_bytes_ = 0;
  CommQueue queue_;  // last: its thread stops before the buffers go
};

}  // namespace trainctl::parallel
