#pragma once
// Everything one training run is configured with, typed, built once from the job spec by
// run_options() (train/spec_options.h) at the start of run_training, evaluate_checkpoint
// and inspect_step. Below those entry points nothing reads config::JobSpec: the engine,
// the checkpointer, the reporter, the export and the parameter-server worker take these
// options (or the part they need). What also depends on this rank's place in the layout
// (its batch share, pipeline program, model shard, DP options) is derived from them and
// the process groups in train/rank_options.h.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "data/dataset.h"
#include "model/gpt.h"
#include "model/model_config.h"
#include "observe/mlflow_tracker.h"
#include "ops/backend.h"
#include "optim/loss_scaler.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"
#include "parallel/grad_sync.h"
#include "parallel/periodic_sync.h"
#include "parallel/pipeline_schedule.h"
#include "util/dtype.h"
#include "util/layout.h"

namespace trainctl::train {

// model.* and the shapes of the batches it runs on.
struct ModelOptions {
  model::ModelConfig config;
  int micro_batch_size = 1;
  int seq_len = 1;
  // training.activation_checkpointing.
  model::Recompute recompute = model::Recompute::none;
  // model.init_from: a Hugging Face folder the parameters start from ("" = random).
  std::filesystem::path init_from;
};

// parallel.*: the layout and how work and gradients are split within it.
struct ParallelOptions {
  Layout layout;
  parallel::ScheduleKind schedule = parallel::ScheduleKind::one_f_one_b;  // with pp > 1
  int virtual_stages = 1;
  // parallel.stage_balance / layers_per_stage: the blocks of each pipeline stage.
  model::StageSplit stages;
  int zero = 0;        // ZeRO stage as asked; it applies with a DP group of more than one rank
  int grad_accum = 1;  // micro-batches per step and DP rank
  // The DP gradient reduction: bucket size, wire dtype, PowerSGD (its seed included); the
  // per-rank parts (the gradient matrices) are left empty.
  parallel::GradSyncOptions grad_sync;
  // dp_sync local_sgd / diloco, or allreduce.
  parallel::PeriodicSyncOptions periodic;
  // mode: parameter_server: the workers push gradients to ps_servers server processes.
  bool parameter_server = false;
  int ps_servers = 1;
  bool sequence_parallel = false;  // parallel.sequence_parallel (model::GptOptions)
};

// optimizer.*, training.grad_clip and precision's loss scaling.
struct OptimizerSetup {
  optim::OptimizerOptions update;
  optim::LrSchedule lr;
  double grad_clip = 1.0;  // 0: no clipping
  // precision.compute: fp16 only: dynamic loss scaling.
  std::optional<optim::LossScalerOptions> loss_scaling;
};

// The loop: how long, and when it evaluates.
struct TrainingOptions {
  int64_t steps = 1;
  int eval_every = 0;  // 0: never
  int eval_batches = 4;
};

// checkpoint.*: when checkpoints are written and how many are kept.
struct CheckpointOptions {
  int every_steps = 0;
  double every_minutes = 0;
  int keep_last = 3;
  bool async = true;
  bool export_hf = false;
};

// logging.*: what the run lets people see.
struct ObservabilityOptions {
  int log_every_steps = 10;
  bool tensorboard = true;
  int profile_first = 0;  // logging.profile_steps, 1-based inclusive; 0, 0: off
  int profile_last = 0;
  bool profiling() const { return profile_first > 0; }
  // The resolved spec as YAML, shown as text in TensorBoard and MLflow's params.
  std::string resolved_yaml;
  std::optional<observe::MlflowSettings> mlflow;  // logging.mlflow
};

// runtime.fault_tolerance (train/elastic_training.h): replica groups that keep training
// through a failure.
struct FaultToleranceOptions {
  bool enabled = false;
  int min_replicas = 1;
  std::chrono::milliseconds heartbeat_timeout{10000};
  std::chrono::milliseconds join_timeout{60000};
  std::filesystem::path replay;  // a membership.jsonl to replay ("" off)
};

struct RunOptions {
  std::string name;
  uint64_t seed = 0;
  Device device = Device::cpu;
  ops::BackendOptions backend;  // training.threads, precision.compute
  ModelOptions model;
  data::DatasetOptions data;
  ParallelOptions parallel;
  OptimizerSetup optimizer;
  TrainingOptions training;
  CheckpointOptions checkpoint;
  ObservabilityOptions observability;
  // runtime.comm_timeout_s: the parameter-server client's connect and reply deadlines.
  std::chrono::milliseconds comm_timeout{0};
  FaultToleranceOptions fault_tolerance;
};

}  // namespace trainctl::train
