#pragma once
// The one place where the job spec becomes the option structs of the layers below, which
// never see config::JobSpec: run_options(), everything a run is configured with, built
// once at the start of run_training (and of evaluate_checkpoint and inspect_step), and the
// worker's store, process-group and watchdog settings (runtime.*).
#include <chrono>

#include "comm/gloo/gloo_options.h"
#include "config/job_spec.h"
#include "data/dataset.h"
#include "launch/tcp_store_client.h"
#include "launch/watchdog.h"
#include "model/model_config.h"
#include "ops/backend.h"
#include "optim/loss_scaler.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"
#include "train/run_options.h"

namespace trainctl::train {

// ---- the run -------------------------------------------------------------------------

// Every option of a run, from the spec alone (this rank's share: train/rank_options.h).
RunOptions run_options(const config::JobSpec& spec);

// The pieces run_options() is made of, also used on their own (the CLI, the parameter servers).
model::ModelConfig gpt_config(const config::JobSpec& spec);
data::DatasetOptions dataset_options(const config::JobSpec& spec);
optim::OptimizerOptions optimizer_options(const config::JobSpec& spec);
optim::LrSchedule lr_schedule(const config::JobSpec& spec);
// Threads and the matrix-product type (precision.compute) of this worker's backend.
ops::BackendOptions backend_options(const config::JobSpec& spec);
// Dynamic loss scaling, for precision.compute: fp16 only.
optim::LossScalerOptions loss_scaler_options(const config::JobSpec& spec);

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
