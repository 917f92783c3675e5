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
  o.shard =
      model::GptShardSpec::of(options.model.config, options.model.seq_len, p.layout.pp,
                              groups.coord.pp, p.virtual_stages, p.layout.tp, groups.coord.tp);
  o.tp = groups.tp.get();
  o.slots = program.empty() ? 1 : parallel::activation_slots_needed(program);
  o.recompute = options.model.recompute;
  o.sequence_parallel = p.sequence_parallel;
  // ZeRO-3 keeps only shards of the parameters (data_parallel_options: zero applies with
  // dp > 1 only).
  o.unbound_params = p.zero == 3 && groups.dp->size() > 1;
  return o;
}

parallel::DataParallelOptions data_parallel_options(const ParallelOptions& parallel,
                                                    comm::ProcessGroups& groups,
                                                    const model::Gpt& gpt) {
  parallel::DataParallelOptions o;
  o.zero_stage = groups.dp->size() > 1 ? parallel.zero : 0;
  o.sync = parallel.grad_sync;
  if (groups.layout.tp * groups.layout.pp > 1) {
    o.norm.group = groups.world.get();
    o.norm.counted = parallel::norm_counted_ranges(gpt.params());
    o.norm.dp_stride = groups.layout.tp;
  }
  o.periodic = parallel.periodic;
  return o;
}

}  // namespace trainctl::train
