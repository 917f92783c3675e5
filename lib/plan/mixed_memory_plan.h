#pragma once
// The memory plan of `device: cuda` with `precision.compute: bf16 | fp16` and AdamW:
// Megatron-LM's mixed-precision layout, per rank.
//
//   parameters  16-bit model weights (2 bytes each)
//   gradients   the model's gradient buffer, fp32 for bf16 and fp16 alike (Megatron
//               accumulates and reduces bf16 models' gradients in fp32; for fp16 it keeps
//               16-bit gradients and an fp32 copy in the optimizer, but trainctl's
//               parallel/mixed_params.h keeps fp32 ones: summed over micro-batches and
//               ranks under a loss scale, 16-bit gradients overflow or underflow where
//               fp32 ones do not, for 2 bytes a parameter more than Megatron's fp16)
//   master      fp32 master weights; optimizer: AdamW's two fp32 moments. With
//               parallel.zero >= 1 (Megatron's distributed optimizer) both are sharded over
//               dp: 6 + 12/dp bytes per parameter (Megatron's
//               docs/source/api-guide/dist_optimizer.md table, bf16 row).
//   activations 16-bit, counted tensor by tensor (plan/activation_model.h) for trainctl's
//               layer: flash-style attention (no s x s tensor), the recomputation mode's kept
//               set, times the (chunk, micro-batch) pairs the schedule holds at its peak,
//               each chunk weighted by its own layers (not the whole stage); plus one
//               layer's recomputed tensors while recomputing. As in Megatron, a chunk's
//               last output is not kept once sent (the CPU engine keeps it: one more
//               [s·b, h] per in-flight pair, which the GPU layout must free).
//   communication the distributed optimizer's all-gather staging (16-bit shard, and the
//               padded buffer when dp does not divide the parameters, as the CPU engine
//               sizes them), and the pipeline's point-to-point buffers: one activation and
//               one gradient in each direction (Megatron completes a send before the next;
//               the CPU executor's one staging buffer per gradient sent in a step would be
//               tens of GB at 405B scale and must be bounded on the GPU).
//   workspace   the LM head's logits (16-bit) and their fp32 copy for the loss and its
//               gradient (last stage), and one layer's backward scratch.
//
// The trainer builds this model state on both backends (parallel/mixed_params.h) but still
// keeps fp32 activations: device: cpu is planned as the CPU worker measures it
// (plan/memory_plan.cpp, the same model state with fp32 activations), device: cuda with
// fp32 compute likewise.
#include <vector>

#include "config/job_spec.h"
#include "parallel/pipeline_schedule.h"
#include "plan/memory_plan.h"

namespace trainctl::plan {

// device: cuda, precision.compute bf16 or fp16: the layout above.
bool uses_mixed_layout(const config::JobSpec& spec);

// Throws InputError (naming the key and what to use) for a device / precision / optimizer
// combination no memory layout is defined for: 16-bit compute on device: cuda with an
// optimizer other than AdamW (the mixed layout keeps fp32 master weights for AdamW only;
// nothing may silently stay fp32).
void check_memory_layout(const config::JobSpec& spec);

// Bytes per parameter of the layout (before any sharding).
struct MixedLayoutBytes {
  double param = 2, grad = 4, master = 4, moments = 8;
};
MixedLayoutBytes mixed_layout_bytes(DType compute);

// The largest sum, at any point of `program`, of chunk_bytes[chunk] over the (chunk,
// micro-batch) forwards whose backward has not run yet. An empty program (no pipeline):
// one micro-batch of chunk 0.
double peak_in_flight_bytes(const std::vector<parallel::Instruction>& program,
                            const std::vector<double>& chunk_bytes, int* peak_pairs = nullptr);

// Pipeline stage `stage` of a spec with uses_mixed_layout(spec).
MemoryBreakdown plan_mixed_stage(const config::JobSpec& spec, int stage);

}  // namespace trainctl::plan
