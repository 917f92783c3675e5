#pragma once
// Runs one pipeline stage's instruction list (parallel/pipeline_schedule.h) on a model
// shard: forwards and backwards of micro-batches on the shard's chunks, activations and
// gradients sent to and received from the neighbouring stages over the PP group. The
// executor knows nothing of which schedule made the list.
//
// Messages are matched by tag, not by order: (activation | gradient, micro-batch, the
// receiving virtual stage). Sends are asynchronous (isend); everything sent in a step is
// waited for before run() returns. Each (chunk, micro-batch) in flight holds one of the
// model's activation slots from its forward to its backward (or backward_input).
//
// zbv's V order (model::ChunkOrder::v_shape): where the neighbouring virtual stage is on
// this stage, the list has no send/recv and the executor hands over locally: a forward
// copies the other chunk's output into its input slot, a backward's input gradient is kept
// in a staging buffer until the other chunk's backward reads it as its output gradient.
//
// Zero-bubble lists: backward_input runs the chunk's backward with its weight gradients
// and gradient-piece reports kept aside (model/deferred_weight_grads.h); backward_weight
// runs what its backward_input kept. Data parallelism therefore sees a chunk's pieces
// become ready during the chunk's last backward_weight.
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "model/deferred_weight_grads.h"
#include "model/gpt.h"
#include "observe/trace_recorder.h"
#include "parallel/boundary_staging.h"
#include "parallel/pipeline_schedule.h"
#include "parallel/staging_pool.h"

namespace trainctl::parallel {

// The most (chunk, micro-batch) pairs of one chunk held between forward and backward (or
// backward_weight, where B and W are split: W reads inputs kept in the slot) at once: the
// activation slots the model needs for `program`.
int activation_slots_needed(const std::vector<Instruction>& program);
// The same for each chunk (at least 1 each; `chunks` entries, or more if the program names
// more): the slots Gpt allocates per chunk (model::GptOptions::chunk_slots). Under the
// interleaved schedule the first chunk holds more micro-batches than the later ones.
std::vector<int> activation_slots_per_chunk(const std::vector<Instruction>& program, int chunks);
// The most backward_inputs of `program` whose backward_weight has not run yet, at once: the
// kept weight-gradient work the executor holds (model::deferred_weight_floats each).
int weight_grads_held(const std::vector<Instruction>& program);

struct MicroBatchData {
  const int32_t* tokens = nullptr;   // [batch, seq_len], used by the embedding chunk
  const int32_t* targets = nullptr;  // used by the head chunk
};

struct PipelineStepResult {
  double loss_sum = 0.0;  // on the stage holding the head; 0 elsewhere
  int64_t loss_count = 0;
  double idle_s = 0.0;  // time spent waiting for neighbours (receives and sends)
};

class PipelineExecutor {
 public:
  // `pp` is the pipeline group (group rank == stage); `program` the stage's list;
  // `virtual_stages` the chunks per stage. The model must have
  // activation_slots_per_chunk(program) slots in each chunk.
  // `order`: how the lists' chunks map to virtual stages (chunk_order of the schedule).
  // `staging`: the activation and the gradient staging buffers it keeps of each
  // (boundary_staging_pool of the schedule, parallel/boundary_staging.h; fewer may
  // deadlock).
  PipelineExecutor(model::Gpt& gpt, comm::Communicator& pp, std::vector<Instruction> program,
                   int num_micro_batches, model::ChunkOrder order, int staging);
  ~PipelineExecutor();
  PipelineExecutor(const PipelineExecutor&) = delete;
  PipelineExecutor& operator=(const PipelineExecutor&) = delete;

  // One training step: every instruction of the list. `data(mb)` gives micro-batch mb's
  // tokens and targets; `before_final_backward` runs once, before the first backward that
  // completes a chunk's gradients for the step (data parallelism starts syncing there).
  // Parameter gradients accumulate in the model; the backward that finishes each chunk
  // reports its gradient pieces to the model's grad-ready hook.
  PipelineStepResult run_step(const std::function<MicroBatchData(int mb)>& data, float grad_scale,
                              const std::function<void()>& before_final_backward);

  // Forward only over the pipeline for one batch (evaluation): every stage must call it
  // with the same batch. Returns the loss on the head stage.
  PipelineStepResult run_forward(const MicroBatchData& batch);

  // Each instruction becomes a timeline event (micro-batch, chunk, peer stage) while
  // `trace` records (null: none).
  void set_trace(observe::TraceRecorder* trace) { trace_ = trace; }

 private:
  struct Step;  // one run_step's state and instructions (pipeline_executor.cpp)
  uint32_t tag(bool gradient, int micro_batch, int virtual_stage) const;
  int virtual_stage(int chunk) const {
    return model::virtual_stage_of(order_, chunk, stage_, stages_);
  }
  // This stage's chunk holding virtual stage v, or -1 when another stage (or none) does.
  int local_chunk(int v) const;
  // A holder for one backward_input's kept work, reused across steps.
  std::unique_ptr<model::DeferredWeightGrads> take_weight_grads();

  model::Gpt& gpt_;
  comm::Communicator& pp_;
  std::vector<Instruction> program_;
  int stage_, stages_, micro_batches_;
  model::ChunkOrder order_;
  // Outputs leave from the last block's working buffer, gradients from the model's one
  // backward buffer: each message gets its own copy, in backend buffers allocated up front
  // (parallel/boundary_staging.h), each step's StagingPools hand out.
  std::vector<void*> activation_staging_;  // Gpt::boundary_bytes() each
  std::vector<void*> grad_staging_;        // boundary_floats() fp32 each
  std::vector<std::unique_ptr<model::DeferredWeightGrads>> weight_grads_free_;
  observe::TraceRecorder* trace_ = nullptr;
};

}  // namespace trainctl::parallel
