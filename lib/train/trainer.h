#pragma once
// The training engine of one worker: model shard, data, optimizer, metrics, export.
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/process_groups.h"
#include "config/job_spec.h"

namespace trainctl::train {

struct ElasticContext;  // train/elastic_training.h

struct TrainContext {
  std::filesystem::path run_dir;
  int console_fd = -1;  // the launcher's stdout (global rank 0 only), else -1
  int local_rank = 0;   // this worker's index on its node: its GPU with device: cuda
  // Polled once per step: true asks the run to stop cleanly after that step (the model is
  // still exported). Unset: never.
  std::function<bool()> should_stop;
  // Where training starts: "auto" (the newest complete checkpoint under
  // run_dir/checkpoints, else from scratch), "none", or a checkpoint directory.
  std::string resume = "auto";
  // Test hook (launch/test_hooks.h): the checkpoint of this step crashes mid-save (-1: off).
  int64_t crash_in_checkpoint_step = -1;
  // Test hook (TRAINCTL_TEST_SLOWDOWN for this rank): each step's computation takes this
  // many times as long.
  double slowdown = 1.0;
  // Test hook (TRAINCTL_TEST_BATCH_LOG=1): log each step's samples (train/batch_log.h).
  bool batch_log = false;
  // parallel.mode: parameter_server: waits for the servers to publish their addresses
  // and returns them ("host:port", index = server). Unset for other modes.
  std::function<std::vector<std::string>()> ps_server_addresses;
  // parallel.mode: parameter_server: the job token, which the servers ask the workers to
  // prove they hold (ps/ps_auth.h).
  std::string job_token;
  // runtime.fault_tolerance: this worker's replica and the store the replicas agree
  // through (train/elastic_training.h); null otherwise.
  std::shared_ptr<const ElasticContext> elastic;
};

struct TrainResult {
  int64_t steps = 0;
  double final_loss = 0.0;
  double final_val_loss = -1.0;  // < 0: never evaluated
  double tokens_per_s = 0.0;
  bool stopped = false;  // should_stop() ended the run early
};

// Refuses (trainctl::InputError, exit code 2) spec features this build cannot train
// yet, before any worker is spawned, naming the key and what to use instead.
void check_trainable(const config::JobSpec& spec);

// Runs the whole training job on this worker: the run's options built once from `spec`
// (train/run_options.h), then the backend, the engine, the reporter and checkpointer, and
// the loop; nothing below reads the spec. Throws on failure (NumericsError for a NaN/Inf
// loss, CommError when a peer dies, ...).
TrainResult run_training(const config::JobSpec& spec, comm::ProcessGroups& groups,
                         const TrainContext& ctx);

}  // namespace trainctl::train
