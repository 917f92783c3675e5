#pragma once
// Everything one worker trains with, built from the run's options (train/run_options.h)
// and this rank's place in the layout, and the two things it does: one optimizer step,
// and an evaluation. The parallel layout is composed here:
//   - the model shard for this rank's (pipeline stage, TP rank) with TP collectives inside;
//   - with pp > 1, a pipeline executor running this stage's schedule instruction list;
//   - data parallelism (overlapped gradient buckets, ZeRO) over the DP group, the tied
//     embedding's gradient exchanged between the first and last stage, and the global
//     gradient norm summed over the world.
#include <memory>
#include <optional>
#include <vector>

#include "comm/process_groups.h"
#include "data/dataset.h"
#include "data/sampler.h"
#include "model/gpt.h"
#include "observe/trace_recorder.h"
#include "ops/backend.h"
#include "optim/loss_scaler.h"
#include "optim/lr_schedule.h"
#include "parallel/data_parallel.h"
#include "parallel/pipeline_executor.h"
#include "train/moe_balance.h"
#include "train/run_options.h"

namespace trainctl::train {

// What this rank asks for at the end of a step; the ranks' requests are combined in the
// step's one small collective so that every rank acts on the same step.
struct StepRequests {
  bool stop = false;        // a stop signal arrived (any rank's request stops all)
  bool checkpoint = false;  // a time-based checkpoint is due (any rank's request)
  bool written = true;      // this rank's background checkpoint write has finished
};

struct StepOutcome {
  double loss = 0.0;
  double grad_norm = 0.0;
  double lr = 0.0;
  bool stop = false;             // every rank agreed to stop after this step
  bool checkpoint = false;       // some rank asked for a checkpoint after this step
  bool all_written = true;       // every rank's background checkpoint write has finished
  double pipeline_idle_s = 0.0;  // this rank's wait for pipeline neighbours
  double loss_scale = 0.0;       // fp16: the scale this step's gradients carried (else 0)
  bool skipped = false;          // fp16: gradients overflowed, no update (the scale fell)
};

struct Engine {
  // `backend`: made for options.device with options.backend (device/make_backend.h).
  Engine(const RunOptions& options, comm::ProcessGroups& groups,
         std::unique_ptr<ops::Backend> backend);

  // One optimizer step: micro-batches with gradient accumulation (through the pipeline
  // schedule when pp > 1), gradient reduction, clipping, update. The outcome carries the
  // ranks' combined requests.
  StepOutcome train_step(int64_t step, const data::StepBatch& batch, const StepRequests& asked);
  // The first half of train_step: the step's forward and backward passes with gradient
  // accumulation (through the pipeline schedule when pp > 1) and the DP gradient
  // reduction, each token's loss gradient being `dloss`. The loss sums are this rank's if
  // it reports the loss (reports_loss()), else zero. Parameter-server workers call it
  // alone and push the gradients (train/ps_training.h).
  struct Gradients {
    double loss_sum = 0.0;
    int64_t loss_count = 0;
    double pipeline_idle_s = 0.0;
  };
  Gradients compute_gradients(int64_t step, const data::StepBatch& batch, float dloss);
  // The second half of train_step, after the gradients are reduced: the loss and the
  // ranks' requests agreed over the world, the norm, clipping and the update. The
  // fault-tolerant loop (train/elastic_training.h) calls it after its own exchange.
  StepOutcome finish_step(int64_t step, const Gradients& g, const StepRequests& asked,
                          double loss_scale);
  // The loss gradient of each token this step: 1 / tokens per step, times the fp16 loss
  // scale and the DP mode's factor.
  float step_dloss(double loss_scale) const;
  // Mean validation loss over eval_batches batches, split round-robin over DP replicas
  // (collective over the world). `alone`: every batch on this rank, no communication (a
  // parameter-server worker, which holds the whole model; not with pp/tp > 1 or ZeRO-3).
  // `data`: another dataset's validation split (a blend's source), else the run's.
  double evaluate(bool alone = false, const data::Dataset* data = nullptr);

  int64_t tokens_per_step() const { return layout.global_batch() * layout.seq_len; }
  // This rank's loss sums are the ones reported (the head stage's TP rank 0).
  bool reports_loss() const { return gpt.shard().head && groups.coord.tp == 0; }

  // Profiling (logging.profile_steps): the model, the pipeline executor, the communicators
  // and this engine's own phases (micro-batches, gradient sync, optimizer) record into
  // `recorder` while it is active. Null: nothing is recorded.
  void set_trace(observe::TraceRecorder* recorder);
  observe::TraceRecorder* trace = nullptr;

  // A copy: an engine built from temporary options stays valid.
  const RunOptions options;
  comm::ProcessGroups& groups;
  std::unique_ptr<ops::Backend> backend;
  // Pipeline schedule of this stage (empty without pipeline parallelism).
  std::vector<parallel::Instruction> program;
  model::Gpt gpt;
  std::unique_ptr<data::Dataset> dataset;
  data::BatchLayout layout;
  // parallel.mode: parameter_server: the DP machinery runs on a group of one (the servers
  // combine the workers' gradients; comm/solo_communicator.h); null otherwise.
  std::unique_ptr<comm::Communicator> solo_dp;
  parallel::DataParallel data_parallel;
  std::optional<parallel::PipelineExecutor> pipeline;
  // Mixture-of-experts layers: the step's routing statistics, the expert bias's update.
  MoeBalance moe;
  optim::LrSchedule schedule;
  // With precision.compute: fp16 (else empty): multiplies the loss gradient, skips steps
  // whose gradients overflow.
  std::optional<optim::DynamicLossScaler> loss_scaler;
  // Test hook (TRAINCTL_TEST_SLOWDOWN, launch/test_hooks.h): each step's forward and
  // backward passes take this many times as long (the worker sleeps the difference).
  double slowdown = 1.0;
  // Each token's loss enters the step's mean with this weight; DP ranks' gradients are
  // then summed, so the result equals one worker processing the whole global batch.
  float grad_scale;
  // Context parallelism: this rank's two chunks of each sequence, cut from the batch's
  // whole sequences (model/context_chunks.h); the buffers hold the step's cut
  // micro-batches (a pipeline schedule keeps several in flight).
  model::ContextChunks cp_chunks;
  std::vector<int32_t> cp_tokens, cp_targets;
  // Micro-batch `m`'s rows the model runs on: `full` itself, or this rank's chunks of it.
  const int32_t* local_rows(const int32_t* full, std::vector<int32_t>& buffer, int m = 0);
};

}  // namespace trainctl::train
