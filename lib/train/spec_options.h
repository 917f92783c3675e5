#pragma once
// The one place where the job spec becomes the option structs of the layers below, which
// never see config::JobSpec: the model, data, optimizer, backend and parallel layout of
// the engine, and the worker's store, process-group and watchdog settings (runtime.*).
#include <chrono>
#include <vector>

#include "comm/gloo/gloo_options.h"
#include "comm/process_groups.h"
#include "config/job_spec.h"
#include "data/dataset.h"
#include "data/sampler.h"
#include "launch/tcp_store_client.h"
#include "launch/watchdog.h"
#include "model/gpt.h"
#include "model/model_config.h"
#include "ops/backend.h"
#include "optim/loss_scaler.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"
#include "parallel/data_parallel.h"
#include "parallel/pipeline_schedule.h"

namespace trainctl::train {

// ---- the engine (per worker: `groups` is this worker's place in the layout) ----------

model::ModelConfig gpt_config(const config::JobSpec& spec);
data::DatasetOptions dataset_options(const config::JobSpec& spec);
// This DP rank's share of each step's samples.
data::BatchLayout batch_layout(const config::JobSpec& spec, const comm::ProcessGroups& groups);
optim::OptimizerOptions optimizer_options(const config::JobSpec& spec);
optim::LrSchedule lr_schedule(const config::JobSpec& spec);
// Threads and the matrix-product type (precision.compute) of this worker's backend.
ops::BackendOptions backend_options(const config::JobSpec& spec);
// Dynamic loss scaling, for precision.compute: fp16 only.
optim::LossScalerOptions loss_scaler_options(const config::JobSpec& spec);
// This pipeline stage's instruction list (empty without pipeline parallelism).
std::vector<parallel::Instruction> stage_program(const config::JobSpec& spec,
                                                 const comm::ProcessGroups& groups);
// The model shard of this rank's (pipeline stage, TP rank), with activation slots for the
// micro-batches `program` keeps in flight.
model::GptOptions model_options(const config::JobSpec& spec, comm::ProcessGroups& groups,
                                const std::vector<parallel::Instruction>& program);
parallel::DataParallelOptions data_parallel_options(const config::JobSpec& spec,
                                                    comm::ProcessGroups& groups,
                                                    const model::Gpt& gpt);

// ---- the worker's connections (runtime.comm_timeout_s, runtime.allreduce_algo) --------

// A collective in flight this long is a hang.
std::chrono::milliseconds comm_timeout(const config::JobSpec& spec);
// The worker's rendezvous-store connection.
launch::StoreClientOptions store_options(const config::JobSpec& spec);
// The Gloo groups; `timeout` (also the NCCL groups') is later than the hang watchdog's, so
// the watchdog's report (which ranks reached the call) comes first.
comm::GlooOptions gloo_options(const config::JobSpec& spec);
launch::WatchdogOptions watchdog_options(const config::JobSpec& spec, int world_size);

}  // namespace trainctl::train
