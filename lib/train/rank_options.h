#pragma once
// This rank's share of a run: what RunOptions (train/run_options.h) become at one place in
// the layout (`groups`: this worker's coordinates and groups). Pure functions of the two;
// none reads the job spec.
#include <vector>

#include "comm/process_groups.h"
#include "data/sampler.h"
#include "model/gpt.h"
#include "parallel/data_parallel.h"
#include "parallel/pipeline_schedule.h"
#include "train/run_options.h"

namespace trainctl::train {

// This DP rank's share of each step's samples.
data::BatchLayout batch_layout(const RunOptions& options, const comm::ProcessGroups& groups);
// This pipeline stage's instruction list (empty without pipeline parallelism).
std::vector<parallel::Instruction> stage_program(const ParallelOptions& parallel,
                                                 const comm::ProcessGroups& groups);
// The model shard of this rank's (pipeline stage, TP rank), with activation slots for the
// micro-batches `program` keeps in flight.
model::GptOptions model_options(const RunOptions& options, comm::ProcessGroups& groups,
                                const std::vector<parallel::Instruction>& program);
// Context parallelism's cut of each sequence for this rank (model/context_chunks.h), and
// the sequence length the model runs on: seq_len / cp.
model::ContextChunks context_chunks(const RunOptions& options, const comm::ProcessGroups& groups);
int local_seq_len(const RunOptions& options);
parallel::DataParallelOptions data_parallel_options(const ParallelOptions& parallel,
                                                    comm::ProcessGroups& groups,
                                                    const model::Gpt& gpt, DType compute);

}  // namespace trainctl::train
