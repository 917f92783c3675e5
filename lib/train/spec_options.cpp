#include "train/spec_options.h"

#include <cmath>

#include "config/load.h"
#include "parallel/grad_comm.h"

namespace trainctl::train {

namespace {

// The hang watchdog fires at runtime.comm_timeout_s; Gloo's own timeout is set this much
// later, so the watchdog's report (which ranks reached the call) comes first. It covers
// the watchdog's check period and its wait for the other ranks' reports.
constexpr std::chrono::milliseconds kWatchdogPeriod{1000};
constexpr std::chrono::milliseconds kWatchdogGather{2000};
constexpr std::chrono::milliseconds kGlooTimeoutMargin{5000};

// parallel.*, with the DP gradient reduction's options (PowerSGD's seed is the job's).
ParallelOptions parallel_options(const config::JobSpec& spec) {
  const config::ParallelSpec& s = spec.parallel;
  ParallelOptions p;
  p.layout = s;
  p.schedule = parallel::parse_schedule_kind(s.schedule);
  p.virtual_stages = s.virtual_stages;
  p.stages = {.equal = s.stage_balance == "equal", .layers = s.layers_per_stage};
  p.zero = s.zero;
  p.grad_accum = spec.grad_accum();
  p.grad_sync.buckets.bucket_bytes = static_cast<size_t>(s.bucket_mb * (1 << 20));
  p.grad_sync.dtype = parallel::parse_grad_comm_dtype(s.grad_comm);
  if (s.grad_compression == "powersgd") {
    p.grad_sync.powersgd = parallel::PowerSgdOptions{.rank = s.powersgd_rank,
                                                     .seed = spec.seed,
                                                     .only_when_smaller = true,
                                                     .warmup_steps = s.powersgd_warmup_steps};
  }
  p.periodic.mode = parallel::parse_dp_sync_mode(s.dp_sync);
  p.periodic.sync_every = s.sync_every;
  p.periodic.outer_lr = s.outer_lr;
  p.periodic.outer_momentum = s.outer_momentum;
  p.parameter_server = s.mode == "parameter_server";
  p.ps_servers = s.ps_servers;
  p.sequence_parallel = s.sequence_parallel;
  return p;
}

OptimizerSetup optimizer_setup(const config::JobSpec& spec) {
  OptimizerSetup o;
  o.update = optimizer_options(spec);
  o.lr = lr_schedule(spec);
  o.grad_clip = spec.training.grad_clip;
  if (spec.precision.compute == DType::fp16) o.loss_scaling = loss_scaler_options(spec);
  return o;
}

ObservabilityOptions observability_options(const config::JobSpec& spec) {
  ObservabilityOptions o;
  o.log_every_steps = spec.logging.every_steps;
  o.tensorboard = spec.logging.tensorboard;
  o.profile_first = spec.logging.profile_first;
  o.profile_last = spec.logging.profile_last;
  o.resolved_yaml = config::to_yaml(spec);
  if (spec.logging.mlflow.enabled()) {
    o.mlflow = observe::MlflowSettings{.tracking_uri = spec.logging.mlflow.tracking_uri,
                                       .experiment = spec.logging.mlflow.experiment,
                                       .run_name = spec.logging.mlflow.run_name};
  }
  return o;
}

}  // namespace

RunOptions run_options(const config::JobSpec& spec) {
  RunOptions o;
  o.name = spec.name;
  o.seed = spec.seed;
  o.device = spec.device;
  o.backend = backend_options(spec);
  o.model.config = gpt_config(spec);
  o.model.micro_batch_size = spec.training.micro_batch_size;
  o.model.seq_len = spec.model.seq_len;
  o.model.init_from = spec.model.init_from;
  o.model.recompute = model::parse_recompute(spec.training.activation_checkpointing);
  o.data = dataset_options(spec);
  o.parallel = parallel_options(spec);
  o.optimizer = optimizer_setup(spec);
  o.training.steps = spec.training.steps;
  o.training.eval_every = spec.training.eval_every;
  o.training.eval_batches = spec.training.eval_batches;
  const config::CheckpointSpec& c = spec.checkpoint;
  o.checkpoint = {c.every_steps, c.every_minutes, c.keep_last, c.async, c.export_hf};
  o.observability = observability_options(spec);
  o.comm_timeout = comm_timeout(spec);
  const config::FaultToleranceSpec& ft = spec.runtime.fault_tolerance;
  o.fault_tolerance = {ft.enabled, ft.min_replicas,
                       std::chrono::milliseconds(std::lround(ft.heartbeat_timeout_s * 1000)),
                       std::chrono::milliseconds(std::lround(ft.join_timeout_s * 1000)), ft.replay};
  return o;
}

model::ModelConfig gpt_config(const config::JobSpec& spec) {
  model::ModelConfig c;
  c.vocab_size = spec.model.vocab_size;
  c.max_seq_len = spec.model.seq_len;
  c.n_layer = spec.model.n_layer;
  c.n_head = spec.model.n_head;
  c.d_model = spec.model.d_model;
  if (spec.model.is_llama()) {
    c.family = model::Family::llama;
    c.n_kv_head = spec.model.kv_heads();
    c.ffn_hidden = spec.model.mlp_hidden();
    c.norm_eps = static_cast<float>(spec.model.norm_eps);
    c.rope_theta = static_cast<float>(spec.model.rope_theta);
    c.tie_embeddings = spec.model.tie_embeddings;
  }
  if (spec.model.moe.enabled()) {
    const config::MoeSpec& e = spec.model.moe;
    c.moe.num_experts = e.num_experts;
    c.moe.top_k = e.top_k;
    c.moe.expert_ffn_hidden = spec.model.expert_hidden();
    c.moe.shared_experts = e.shared_experts;
    c.moe.score = e.score == "sigmoid" ? model::MoeScore::sigmoid : model::MoeScore::softmax;
    c.moe.aux_loss_coef = e.balance == "aux_loss" ? static_cast<float>(e.aux_loss_coef) : 0.0f;
    c.moe.bias_update_rate = e.balance == "bias" ? static_cast<float>(e.bias_update_rate) : 0.0f;
    c.moe.capacity_factor = static_cast<float>(e.capacity_factor);
    c.moe.layers_every = e.layers_every;
    c.moe.layers_from = e.layers_from;
  }
  return c;
}

data::DatasetOptions dataset_options(const config::JobSpec& spec) {
  data::DatasetOptions d;
  d.type = spec.data.type;
  d.path = spec.data.path;
  d.val_fraction = spec.data.val_fraction;
  d.seed = spec.seed;
  d.vocab_size = spec.model.vocab_size;
  d.seq_len = spec.model.seq_len;
  d.blend_seed = spec.data.seed.value_or(spec.seed);
  for (const config::DataSourceSpec& s : spec.data.sources) {
    d.sources.push_back({s.name, s.type, s.path, s.weight});
  }
  return d;
}

optim::OptimizerOptions optimizer_options(const config::JobSpec& spec) {
  optim::OptimizerOptions o;
  o.type = spec.optimizer.type;
  o.beta1 = spec.optimizer.beta1;
  o.beta2 = spec.optimizer.beta2;
  o.eps = spec.optimizer.eps;
  o.weight_decay = spec.optimizer.weight_decay;
  return o;
}

optim::LrSchedule lr_schedule(const config::JobSpec& spec) {
  return {spec.optimizer.lr, spec.optimizer.min_lr, spec.optimizer.warmup_steps,
          spec.training.steps, spec.optimizer.decay};
}

ops::BackendOptions backend_options(const config::JobSpec& spec) {
  ops::BackendOptions o;
  o.threads = spec.training.threads;
  o.matmul = spec.precision.compute;
  return o;
}

optim::LossScalerOptions loss_scaler_options(const config::JobSpec& spec) {
  optim::LossScalerOptions o;
  o.initial_scale = spec.precision.loss_scale;
  o.growth_interval = spec.precision.loss_scale_growth_steps;
  return o;
}

std::chrono::milliseconds comm_timeout(const config::JobSpec& spec) {
  return std::chrono::milliseconds(static_cast<int64_t>(spec.runtime.comm_timeout_s * 1000.0));
}

launch::StoreClientOptions store_options(const config::JobSpec& spec) {
  launch::StoreClientOptions o;
  o.connect_timeout = comm_timeout(spec);
  o.timeout = comm_timeout(spec);
  return o;
}

comm::GlooOptions gloo_options(const config::JobSpec& spec) {
  comm::GlooOptions o;
  o.timeout = comm_timeout(spec) + kGlooTimeoutMargin;
  o.allreduce_algo = comm::parse_allreduce_algo(spec.runtime.allreduce_algo);
  return o;
}

launch::WatchdogOptions watchdog_options(const config::JobSpec& spec, int world_size) {
  launch::WatchdogOptions o;
  o.timeout = comm_timeout(spec);
  o.period = kWatchdogPeriod;
  o.gather_timeout = kWatchdogGather;
  o.world_size = world_size;
  return o;
}

}  // namespace trainctl::train
