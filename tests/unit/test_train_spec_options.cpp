// train/spec_options.h: the one translation from a parsed job spec to the option structs of
// the layers below (RunOptions: model, data, parallel, optimizer, loop, checkpoint,
// observability; store, Gloo, watchdog), and train/rank_options.h: one rank's share of a
// run from RunOptions and its place in the layout, without the spec.
#include <catch2/catch.hpp>
#include <chrono>

#include "comm/solo_communicator.h"
#include "config/load.h"
#include "train/rank_options.h"
#include "train/spec_options.h"

using namespace trainctl;
using std::chrono::milliseconds;

namespace {

config::JobSpec spec_from(const std::string& yaml) {
  return config::parse_job_spec(yaml, "job.yaml", "/work/specs");
}

// A world of 8 ranks seen from one rank, without communicators (the options that need
// none only read the layout and this rank's coordinates).
comm::ProcessGroups groups_at(const Layout& layout, int rank) {
  comm::ProcessGroups g;
  g.layout = layout;
  g.rank = rank;
  g.coord = comm::coord_of(layout, rank);
  return g;
}

const char* kJob = R"(name: opts
seed: 77
model: {vocab_size: 96, seq_len: 32, n_layer: 4, n_head: 2, d_model: 64}
data: {type: synthetic, val_fraction: 0.25}
parallel: {dp: 2, tp: 2, pp: 2, schedule: gpipe}
training: {steps: 40, micro_batch_size: 2, global_batch_size: 16, threads: 3}
optimizer: {type: adamw, lr: 0.01, betas: [0.8, 0.9], weight_decay: 0.05, warmup_steps: 4,
            decay: linear, min_lr: 0.001}
precision: {compute: fp16, loss_scale: 1024, loss_scale_growth_steps: 50}
runtime: {comm_timeout_s: 12.5, allreduce_algo: ring}
)";

}  // namespace

TEST_CASE("spec options: model, data, optimizer, schedule and backend", "[train]") {
  const config::JobSpec s = spec_from(kJob);

  const model::ModelConfig c = train::gpt_config(s);
  CHECK(c.vocab_size == 96);
  CHECK(c.max_seq_len == 32);
  CHECK(c.n_layer == 4);
  CHECK(c.n_head == 2);
  CHECK(c.d_model == 64);

  const data::DatasetOptions d = train::dataset_options(s);
  CHECK(d.type == "synthetic");
  CHECK(d.val_fraction == 0.25);
  CHECK(d.seed == 77);
  CHECK(d.vocab_size == 96);
  CHECK(d.seq_len == 32);

  const optim::OptimizerOptions o = train::optimizer_options(s);
  CHECK(o.type == "adamw");
  CHECK(o.beta1 == 0.8);
  CHECK(o.beta2 == 0.9);
  CHECK(o.weight_decay == 0.05);

  const optim::LrSchedule lr = train::lr_schedule(s);
  CHECK(lr.lr == 0.01);
  CHECK(lr.min_lr == 0.001);
  CHECK(lr.warmup_steps == 4);
  CHECK(lr.total_steps == 40);
  CHECK(lr.decay == "linear");

  const ops::BackendOptions b = train::backend_options(s);
  CHECK(b.threads == 3);
  CHECK(b.matmul == DType::fp16);
  CHECK(train::backend_options(spec_from("name: x\nprecision: {compute: bf16}\n")).matmul ==
        DType::bf16);
  CHECK(train::backend_options(spec_from("name: x\n")).matmul == DType::fp32);

  const optim::LossScalerOptions ls = train::loss_scaler_options(s);
  CHECK(ls.initial_scale == 1024.0);
  CHECK(ls.growth_interval == 50);
}

TEST_CASE("run options: every section of the run from the spec", "[train]") {
  const config::JobSpec s =
      spec_from(std::string(kJob) +
                R"(checkpoint: {every_steps: 5, every_minutes: 2.5, keep_last: 7, async: false}
logging: {every_steps: 3, tensorboard: false, profile_steps: [2, 4]}
)");
  const train::RunOptions o = train::run_options(s);
  CHECK(o.name == "opts");
  CHECK(o.seed == 77);
  CHECK(o.device == Device::cpu);
  CHECK(o.backend.threads == 3);
  CHECK(o.backend.matmul == DType::fp16);

  CHECK(o.model.config == train::gpt_config(s));
  CHECK(o.model.micro_batch_size == 2);
  CHECK(o.model.seq_len == 32);
  CHECK(o.model.recompute == model::Recompute::none);
  CHECK(o.data.seed == 77);
  CHECK(o.data.val_fraction == 0.25);

  CHECK(o.parallel.layout == Layout{2, 2, 2});
  CHECK(o.parallel.schedule == parallel::ScheduleKind::gpipe);
  CHECK(o.parallel.virtual_stages == 1);
  CHECK(o.parallel.zero == 0);
  CHECK(o.parallel.grad_accum == 4);  // 16 / (2 * dp 2)
  CHECK(o.parallel.grad_sync.buckets.bucket_bytes == size_t{1} << 20);
  CHECK(o.parallel.grad_sync.dtype == parallel::GradCommDType::fp32);
  CHECK_FALSE(o.parallel.grad_sync.powersgd);
  CHECK(o.parallel.periodic.mode == parallel::DpSyncMode::allreduce);
  CHECK_FALSE(o.parallel.parameter_server);

  CHECK(o.optimizer.update.beta1 == 0.8);
  CHECK(o.optimizer.lr.total_steps == 40);
  CHECK(o.optimizer.lr.decay == "linear");
  CHECK(o.optimizer.grad_clip == 1.0);
  REQUIRE(o.optimizer.loss_scaling);  // fp16
  CHECK(o.optimizer.loss_scaling->initial_scale == 1024.0);
  CHECK(o.optimizer.loss_scaling->growth_interval == 50);

  CHECK(o.training.steps == 40);
  CHECK(o.training.eval_every == 0);
  CHECK(o.training.eval_batches == 4);
  CHECK(o.checkpoint.every_steps == 5);
  CHECK(o.checkpoint.every_minutes == 2.5);
  CHECK(o.checkpoint.keep_last == 7);
  CHECK_FALSE(o.checkpoint.async);
  CHECK(o.observability.log_every_steps == 3);
  CHECK_FALSE(o.observability.tensorboard);
  CHECK(o.observability.profiling());
  CHECK(o.observability.profile_first == 2);
  CHECK(o.observability.profile_last == 4);
  // TensorBoard's text is the resolved spec, which parses back to the same spec.
  CHECK(o.observability.resolved_yaml == config::to_yaml(s));
  CHECK(o.comm_timeout == milliseconds(12500));
}

TEST_CASE("run options: precision, DP sync, compression and parameter servers", "[train]") {
  const train::RunOptions bf16 = train::run_options(spec_from(R"(name: x
model: {vocab_size: 96, seq_len: 32, n_layer: 2, n_head: 2, d_model: 64}
parallel: {dp: 2, grad_comm: bf16, bucket_mb: 0.5}
training: {micro_batch_size: 2, global_batch_size: 8, grad_clip: 0, eval_every: 5,
           activation_checkpointing: selective}
precision: {compute: bf16}
)"));
  CHECK_FALSE(bf16.optimizer.loss_scaling);  // only fp16 scales the loss
  CHECK(bf16.optimizer.grad_clip == 0.0);
  CHECK(bf16.training.eval_every == 5);
  CHECK(bf16.model.recompute == model::Recompute::selective);
  CHECK(bf16.parallel.grad_accum == 2);
  CHECK(bf16.parallel.grad_sync.dtype == parallel::GradCommDType::bf16);
  CHECK(bf16.parallel.grad_sync.buckets.bucket_bytes == size_t{1} << 19);

  const train::RunOptions local = train::run_options(spec_from(R"(name: x
parallel: {dp: 2, dp_sync: diloco, sync_every: 4, outer_lr: 0.5, outer_momentum: 0.1}
training: {micro_batch_size: 2, global_batch_size: 4}
)"));
  CHECK(local.parallel.periodic.mode == parallel::DpSyncMode::diloco);
  CHECK(local.parallel.periodic.sync_every == 4);
  CHECK(local.parallel.periodic.outer_lr == 0.5);
  CHECK(local.parallel.periodic.outer_momentum == 0.1);

  const train::RunOptions psgd = train::run_options(spec_from(R"(name: x
seed: 9
parallel: {dp: 2, grad_compression: powersgd, powersgd_rank: 3, powersgd_warmup_steps: 2}
training: {micro_batch_size: 2, global_batch_size: 4}
)"));
  REQUIRE(psgd.parallel.grad_sync.powersgd);
  CHECK(psgd.parallel.grad_sync.powersgd->rank == 3);
  CHECK(psgd.parallel.grad_sync.powersgd->seed == 9);  // the job's seed
  CHECK(psgd.parallel.grad_sync.powersgd->warmup_steps == 2);

  const train::RunOptions ps = train::run_options(spec_from(R"(name: x
parallel: {dp: 2, mode: parameter_server, parameter_server: {servers: 3}}
training: {micro_batch_size: 2, global_batch_size: 4}
)"));
  CHECK(ps.parallel.parameter_server);
  CHECK(ps.parallel.ps_servers == 3);
}

TEST_CASE("rank options: each rank's batch share, pipeline program and model shard", "[train]") {
  const config::JobSpec s = spec_from(kJob);
  const train::RunOptions o = train::run_options(s);
  // rank = (pp * dp + dp_rank) * tp + tp_rank: rank 6 is pp 1, dp 1, tp 0.
  comm::ProcessGroups g = groups_at(o.parallel.layout, 6);
  REQUIRE(g.coord == comm::Coord{1, 0, 1});

  const data::BatchLayout bl = train::batch_layout(o, g);
  CHECK(bl.micro_batch == 2);
  CHECK(bl.seq_len == 32);
  CHECK(bl.grad_accum == 4);  // 16 / (2 * dp 2)
  CHECK(bl.dp == 2);
  CHECK(bl.dp_rank == 1);
  CHECK(bl.global_batch() == 16);

  // GPipe on the last of two stages: every forward before every backward, 4 micro-batches.
  const std::vector<parallel::Instruction> program = train::stage_program(o.parallel, g);
  CHECK(program == parallel::make_schedule(parallel::ScheduleKind::gpipe, 1, 2, 4, 1));
  CHECK(train::stage_program(train::run_options(spec_from("name: x\n")).parallel,
                             groups_at(Layout{}, 0))
            .empty());

  // The last stage's TP rank 0; GPipe keeps all 4 micro-batches' activations.
  g.dp = std::make_unique<comm::SoloCommunicator>("dp");
  const model::GptOptions m = train::model_options(o, g, program);
  CHECK(m.shard.chunks == model::GptShardSpec::of(o.model.config, 32, 2, 1, 1, 2, 0).chunks);
  CHECK(m.shard.head);
  CHECK_FALSE(m.shard.embedding);
  CHECK(m.shard.tp_size == 2);
  CHECK(m.slots == 4);
  CHECK(m.recompute == model::Recompute::none);
  CHECK_FALSE(m.unbound_params);
}

TEST_CASE("spec options: store, Gloo and watchdog wait for runtime.comm_timeout_s", "[train]") {
  const config::JobSpec s = spec_from(kJob);
  CHECK(train::comm_timeout(s) == milliseconds(12500));

  const launch::StoreClientOptions store = train::store_options(s);
  CHECK(store.connect_timeout == milliseconds(12500));
  CHECK(store.timeout == milliseconds(12500));

  const launch::WatchdogOptions w = train::watchdog_options(s, 8);
  CHECK(w.timeout == milliseconds(12500));
  CHECK(w.world_size == 8);

  // Gloo gives up only after the watchdog has fired and gathered the other ranks' reports.
  const comm::GlooOptions gloo = train::gloo_options(s);
  CHECK(gloo.allreduce_algo == comm::AllreduceAlgo::ring);
  CHECK(gloo.timeout > w.timeout + w.period + w.gather_timeout);
}
