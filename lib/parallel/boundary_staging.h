#pragma once
// The buffers a pipeline stage's outgoing activations and gradients wait in (issue 35).
//
// A chunk's output activation and its input gradient are written into buffers the model
// reuses at once (the working buffer of its last block, the one backward buffer), so each
// one that leaves the chunk is first copied into a staging buffer: for a send, until the
// send completes; for a hand-over to this stage's other chunk (zbv's turn of the V), until
// that chunk reads it. Keeping one buffer per message of a step, or each output in its
// micro-batch's activation slot until the backward, costs the whole step's messages: 2 x m
// gradients on an interleaved stage (m micro-batches), 32 GB at Llama 3 405B's shapes.
// The executor instead keeps two pools of the same size, one for activations (in the kept
// type, model::Gpt::boundary_bytes) and one for gradients (fp32), and when every buffer of
// a pool is taken it waits for that pool's oldest send to complete and reuses its buffer
// (PipelineExecutor), as Megatron-LM completes each send before the next.
//
// A send completes only once its receiver has posted the receive (Gloo's and NCCL's
// point-to-point alike), so too small a pool deadlocks: a stage waits for a receiver that
// is itself waiting for this stage. finishes_with_pool() runs every stage's list together
// under that rule, treating a send as complete only when its receiver has reached the
// matching receive (the latest any transport completes it) and every send as waited at the
// end of the step, as the executor does. Whether such a run finishes does not depend on
// timing: each stage's list is fixed and every condition it waits on, once true, stays
// true, so one interleaving decides for all. boundary_staging_pool() is the fewest buffers
// with which it finishes, plus one so that a stage can stage its next message while the
// previous one is still on the wire.
#include <vector>

#include "parallel/pipeline_schedule.h"

namespace trainctl::parallel {

// The gradient messages one step of `program` stages with no reuse: its input gradients
// sent, and those handed to its other chunk locally (zbv's turn of the V).
int grad_staging_buffers(const std::vector<Instruction>& program);
// The same for output activations: those sent, and those handed to its other chunk.
int activation_staging_buffers(const std::vector<Instruction>& program);

// True when every stage of `lists` (lists[s] runs on stage s, chunks placed by `order`)
// finishes its step with `pool` activation and `pool` gradient staging buffers each, under
// the rule above. Throws std::logic_error for a send no list receives.
bool finishes_with_pool(const std::vector<std::vector<Instruction>>& lists, model::ChunkOrder order,
                        int pool);

// The pool size every stage of the schedule keeps (the same on every stage and for both
// pools): at least 1, at most the most messages a stage stages in a step. 0 for a single
// stage (no pipeline).
int boundary_staging_pool(ScheduleKind kind, int num_stages, int num_micro_batches,
                          int virtual_stages = 1);

}  // namespace trainctl::parallel
