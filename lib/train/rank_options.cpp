#include "train/rank_options.h"

#include "parallel/pipeline_executor.h"

namespace trainctl::train {

data::BatchLayout batch_layout(const RunOptions& options, const comm::ProcessGroups& groups) {
  return {options.model.micro_batch_size, options.model.seq_len, options.parallel.grad_accum,
          options.parallel.layout.dp, groups.coord.dp};
}

std::vector<parallel::Instruction> stage_program(const ParallelOptions& parallel,
                                                 const comm::ProcessGroups& groups) {
  if (parallel.layout.pp == 1) return {};
  return parallel::make_schedule(parallel.schedule, groups.coord.pp, parallel.layout.pp,
                                 parallel.grad_accum, parallel.virtual_stages);
}

model::GptOptions model_options(const RunOptions& options, comm::ProcessGroups& groups,
                                const std::vector<parallel::Instruction>& program) {
  const ParallelOptions& p = options.parallel;
  model::GptOptions o;
  o.shard = model::GptShardSpec::of(options.model.config, options.model.seq_len, p.layout.pp,
                                    groups.coord.pp, p.virtual_stages, p.layout.tp, groups.coord.tp,
                                    p.stages, parallel::chunk_order(p.schedule));
  o.tp = groups.tp.get();
  // Expert parallelism: the experts of this rank's place in its ep group (rank_coords.h).
  o.shard.ep_size = p.layout.ep;
  o.shard.ep_rank = groups.coord.dp % p.layout.ep;
  o.ep = groups.ep.get();
  o.slots = program.empty() ? 1 : parallel::activation_slots_needed(program);
  if (!program.empty()) {
    o.chunk_slots = parallel::activation_slots_per_chunk(program, p.virtual_stages);
  }
  o.recompute = options.model.recompute;
  o.sequence_parallel = p.sequence_parallel;
  // ZeRO-3 keeps only shards of the parameters (data_parallel_options: zero applies with
  // dp > 1 only).
  o.unbound_params = p.zero == 3 && groups.dp->size() > 1;
  // 16-bit compute: the mixed-precision layout keeps the weights in 16 bits and the
  // gradients in the model's fp32 buffer (parallel/mixed_params.h).
  o.grads_only = options.backend.matmul != DType::fp32;
  // ... and the activations kept for backward in 16-bit stores (model/activation_arena.h).
  o.kept_activations = options.backend.matmul;
  o.cp = context_chunks(options, groups);
  o.cp_group = groups.cp.get();
  return o;
}

model::ContextChunks context_chunks(const RunOptions& options, const comm::ProcessGroups& groups) {
  return model::ContextChunks::of(options.parallel.layout.cp, groups.coord.cp,
                                  options.model.seq_len);
}

int local_seq_len(const RunOptions& options) {
  return options.model.seq_len / options.parallel.layout.cp;
}

parallel::DataParallelOptions data_parallel_options(const ParallelOptions& parallel,
                                                    comm::ProcessGroups& groups,
                                                    const model::Gpt& gpt, DType compute) {
  parallel::DataParallelOptions o;
  o.weights = compute;
  o.zero_stage = groups.dp->size() > 1 ? parallel.zero : 0;
  o.sync = parallel.grad_sync;
  if (groups.layout.tp * groups.layout.pp > 1 || groups.edp) {
    o.norm.group = groups.world.get();
    o.norm.counted = parallel::norm_counted_ranges(gpt.params(), groups.edp != nullptr);
    o.norm.dp_stride = groups.layout.tp;
  }
  if (groups.edp) {
    // Expert gradients are summed over the DP ranks holding the same experts only.
    o.sync.expert_dp = groups.edp.get();
    o.norm.expert_dp = groups.edp.get();
    o.norm.expert_counted = parallel::expert_counted_ranges(gpt.params());
    o.norm.first_in_ep_group = groups.coord.dp % groups.layout.ep == 0;
    o.ep = groups.ep.get();
  }
  o.periodic = parallel.periodic;
  return o;
}

}  // namespace trainctl::train
