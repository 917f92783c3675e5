#pragma once
// The mixed-precision layout of a model's state (precision.compute: bf16 | fp16), as
// Megatron-LM keeps it, per parameter:
//   weights    the model's copy, in the compute type: 2 bytes;
//   gradients  fp32, the model's flat gradient buffer (ParameterSet::allocate_grads_only):
//              micro-batches accumulate into it and DP sums it in fp32, because bf16's 8
//              significant bits would drop a micro-batch's contribution smaller than 1/256
//              of the running sum, and fp16's sums under a loss scale overflow (above
//              65504) or underflow where fp32's do not; 4 bytes;
//   master     fp32 master weights, the values the optimizer updates: 4 bytes, or with
//              ZeRO-1/2 this rank's shard of them (the moments' ShardLayout), 4/dp.
// With AdamW's two fp32 moments that is 18 bytes per parameter without ZeRO (fp32: 16) and
// 6 + 12/dp with it (Megatron's distributed optimizer).
//
// Between steps, every 16-bit weight is its master value rounded to nearest even. The
// model's parts compute on fp32 inputs, so each unit of the flat layout (a block, the
// embedding, the head: parallel/zero3_units.h) is widened into an fp32 buffer just before
// its use, from the model's block and resident hooks: one buffer as large as the largest
// unit, and one for the small unit a use reads beside another (ln_f beside the head, wpe
// beside wte). No fp32 copy of the whole model exists. Widening is exact, and the matrix products
// round their operands to the compute type anyway: a product sees the weights it saw when they were
// stored in fp32. What changes is the few non-product uses (norm gains, biases, the embedding
// lookup), which now read the rounded values, as on a GPU running Megatron's layout.
//
// Per optimizer step: the passes (hooks), the gradient reduction, then the optimizer on
// master() and publish(). Checkpoints store the master weights (gather_master), so a
// checkpoint is fp32 and resumes in any precision and layout.
#include <cstdint>
#include <vector>

#include "comm/communicator.h"
#include "model/gpt.h"
#include "ops/backend.h"
#include "parallel/comm_stats.h"
#include "parallel/resident_units.h"
#include "parallel/shard_layout.h"
#include "parallel/zero3_units.h"
#include "util/dtype.h"

namespace trainctl::parallel {

// Bytes per parameter the layout keeps for the model, and what it allocates besides (for
// `trainctl plan`; a unit test holds it equal to what MixedParams allocates).
struct MixedParamsBytes {
  int64_t weights = 0;  // 16-bit weights (padded to the master's shard layout)
  int64_t master = 0;   // fp32 master (the whole layout, or one shard)
  int64_t widened = 0;  // the fp32 buffers units are widened into: the largest unit's,
                        // and what a use reads beside it (ResidentUnits::companion_floats)
  int64_t staging = 0;  // ZeRO: this rank's 16-bit shard, sent by the allgather
};
MixedParamsBytes mixed_params_bytes(const std::vector<model::ParamSpec>& specs, int dp_size,
                                    bool sharded);

class MixedParams {
 public:
  // gpt must be built with GptOptions::grads_only; `weights`: bf16 or fp16. `sharded`:
  // the master is split over `dp` like ZeRO's moments (make_shard_layout); otherwise every
  // rank holds it whole. Connects gpt's block hooks (cleared by the destructor).
  MixedParams(model::Gpt& gpt, ops::Backend& backend, DType weights, comm::Communicator& dp,
              bool sharded);
  ~MixedParams();
  MixedParams(const MixedParams&) = delete;
  MixedParams& operator=(const MixedParams&) = delete;

  // The model's initialisation (Gpt::init_weights' values), unit by unit: this rank's
  // master range gets the fp32 values, the weights their rounding. No communication.
  void init_weights(uint64_t seed);

  DType weights_dtype() const { return dtype_; }
  const ShardLayout& layout() const { return layout_; }
  // The fp32 master weights of [master_begin(), master_end()) of the flat layout.
  float* master() const { return master_; }
  int64_t master_begin() const;
  int64_t master_end() const;

  // After the optimizer changed the master: this rank's range rounded into the weights,
  // then (sharded) the weights allgathered over dp: collective. Widened units are
  // forgotten.
  void publish();
  // The whole fp32 master in the flat layout, host memory (collective when sharded): for
  // checkpoints and the final export.
  std::vector<float> gather_master();
  // Keeps this rank's range of a whole fp32 flat buffer as the master, then publish()
  // (collective when sharded).
  void load_master(const float* whole);

  // The last publish()'s allgather (metrics' communication; blocking, so all exposed).
  const StepCommStats& publish_stats() const { return stats_; }

 private:
  struct Slot {
    float* data = nullptr;
    int64_t capacity = 0;  // floats
    int unit = -1;
    int64_t used = 0;  // when it was last handed out (least recently used goes first)
  };
  // Makes `unit` widened in a slot (never `keep`) and binds its parameters there.
  Slot& widened(int unit, const Slot* keep = nullptr);
  void before_resident(model::Gpt::ResidentUse use, bool grads);

  model::Gpt& gpt_;
  ops::Backend& backend_;
  DType dtype_;
  comm::Communicator& dp_;
  bool sharded_;
  ShardLayout layout_;
  std::vector<Zero3Unit> units_;  // over one rank: only their ranges are used
  std::vector<int> unit_of_block_;
  ResidentUnits resident_;
  void* weights_ = nullptr;  // 16-bit, layout_.padded_total() elements
  void* staging_ = nullptr;  // sharded: this rank's 16-bit shard for the allgather
  float* master_ = nullptr;
  Slot slots_[2];
  int64_t uses_ = 0;
  StepCommStats stats_;
};

}  // namespace trainctl::parallel
