#pragma once
// The memory plan: what each rank of a job will hold, estimated from the spec alone
// (`trainctl plan`, `validate`, and the check that refuses a job that will not fit).
//
// What it models, and so what it is compared with: the worker's tensor memory, every
// buffer from Backend::alloc (metrics.jsonl's mem_peak_mb; deterministic for a job and a
// layout), counted by the same allocation calls the engine makes (model::gpt_memory_floats,
// parallel::mixed_params_bytes, the pipeline's staging pools). device: cuda and cpu build
// the same buffers, so one plan serves both; with precision.compute bf16 or fp16 that is
// Megatron-LM's mixed-precision layout (parallel/mixed_params.h, model/activation_arena.h):
// 16-bit weights and kept activations, fp32 gradients, master weights and optimizer state
// (sharded over DP with ZeRO-1/2: 6 + 12/dp bytes per parameter with AdamW), flash-style
// attention with no s x s tensor, each chunk's in-flight micro-batches by the schedule, and
// a stage's outgoing activations and gradients staged in small pools, not kept per
// micro-batch. On a GPU the caching allocator's rounding comes on top. All of it is allocated when
// the engine is built, so the peak is reached before the first step and does not move after. Not
// modelled: the process itself (code, libraries, OpenBLAS and thread stacks), the CPU kernels'
// per-thread scratch, the communication library's internal buffers and host-side copies made while
// saving a checkpoint; those show in mem_rss_peak_mb.
#include <cstdint>
#include <string>
#include <vector>

#include "config/job_spec.h"

namespace trainctl::plan {

// Bytes of one pipeline stage's ranks (every DP and TP rank of a stage holds the same).
struct MemoryBreakdown {
  int stage = 0;
  int activation_slots = 0;  // micro-batches the schedule keeps in flight (its busiest chunk)
  double parameters = 0;     // weights of the stage's shard, fp32 or (mixed precision) 16-bit
                             // (ZeRO-3: the DP shard and the whole embedding and head)
  double gradients = 0;      // the gradient buffer (+ ZeRO-2's reduce-scatter output)
  double master = 0;         // fp32 master weights (mixed-precision layout only)
  double optimizer = 0;      // AdamW's moments (sharded over DP with ZeRO) or SGD's momentum
  double activations = 0;    // kept between forward and backward, plus recomputation's buffers
  double communication = 0;  // ZeRO allgather staging (ZeRO-3: the transient block buffers),
                             // the pipeline's activation and gradient staging pools
  double workspace = 0;      // backward and loss scratch shared by every block
  // Of `parameters`: the routed experts this rank holds (MoE; 1/ep of them with parallel.ep),
  // in bytes of fp32 weights (their gradients and AdamW moments take as much again each).
  double expert_parameters = 0;
  int experts_per_layer = 0;  // routed experts per MoE layer on this rank (0: no MoE)
  double total() const {
    return parameters + gradients + master + optimizer + activations + communication + workspace;
  }
};

// One entry per pipeline stage, stage 0 first. Throws InputError for a spec the model
// cannot be split by (as validation would).
std::vector<MemoryBreakdown> plan_memory(const config::JobSpec& spec);

// The largest stage total: what every rank must fit.
double peak_rank_bytes(const std::vector<MemoryBreakdown>& plan);

// A table, one line per stage (with the world ranks it covers), in MiB.
std::string format_memory_plan(const config::JobSpec& spec,
                               const std::vector<MemoryBreakdown>& plan);

// `plan --json`'s memory_mb: one object per world rank (rank order) with rank, stage,
// activation_slots and the parts (master_weights: the mixed-precision layout's fp32 copy)
// and `total` in MiB. JSON text.
std::string memory_plan_json(const config::JobSpec& spec, const std::vector<MemoryBreakdown>& plan);

// A change to the spec and the peak per-rank estimate it gives.
struct FitOption {
  std::string change;  // e.g. "training.activation_checkpointing: full"
  double peak_bytes = 0;
};
// The single changes (recomputation, ZeRO, twice the tensor-parallel or pipeline ranks,
// half the micro-batch) that lower the estimate: those that fit `limit_bytes` first, the gentlest
// (least saving) of them first; then the others, the biggest saving first.
std::vector<FitOption> fit_options(const config::JobSpec& spec, double limit_bytes);

}  // namespace trainctl::plan
