// train/spec_options.h: the one translation from a parsed job spec to the option structs of
// the layers below (model, data, optimizer, backend, pipeline, DP, store, Gloo, watchdog).
#include <catch2/catch.hpp>
#include <chrono>

#include "config/load.h"
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

TEST_CASE("spec options: each rank's batch share and pipeline program", "[train]") {
  const config::JobSpec s = spec_from(kJob);
  // rank = (pp * dp + dp_rank) * tp + tp_rank: rank 6 is pp 1, dp 1, tp 0.
  const comm::ProcessGroups g = groups_at(s.parallel, 6);
  REQUIRE(g.coord == comm::Coord{1, 0, 1});

  const data::BatchLayout bl = train::batch_layout(s, g);
  CHECK(bl.micro_batch == 2);
  CHECK(bl.seq_len == 32);
  CHECK(bl.grad_accum == 4);  // 16 / (2 * dp 2)
  CHECK(bl.dp == 2);
  CHECK(bl.dp_rank == 1);
  CHECK(bl.global_batch() == 16);

  // GPipe on the last of two stages: every forward before every backward, 4 micro-batches.
  CHECK(train::stage_program(s, g) ==
        parallel::make_schedule(parallel::ScheduleKind::gpipe, 1, 2, 4, 1));
  CHECK(train::stage_program(spec_from("name: x\n"), groups_at(Layout{}, 0)).empty());
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
