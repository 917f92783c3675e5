#include "train/spec_options.h"

#include "parallel/pipeline_executor.h"

namespace trainctl::train {

namespace {

// The hang watchdog fires at runtime.comm_timeout_s; Gloo's own timeout is set this much
// later, so the watchdog's report (which ranks reached the call) comes first. It covers
// the watchdog's check period and its wait for the other ranks' reports.
constexpr std::chrono::milliseconds kWatchdogPeriod{1000};
constexpr std::chrono::milliseconds kWatchdogGather{2000};
constexpr std::chrono::milliseconds kGlooTimeoutMargin{5000};

}  // namespace

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
  return d;
}

data::BatchLayout batch_layout(const config::JobSpec& spec, const comm::ProcessGroups& groups) {
  return {spec.training.micro_batch_size, spec.model.seq_len, spec.grad_accum(), spec.parallel.dp,
          groups.coord.dp};
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

std::vector<parallel::Instruction> stage_program(const config::JobSpec& spec,
                                                 const comm::ProcessGroups& groups) {
  if (spec.parallel.pp == 1) return {};
  return parallel::make_schedule(parallel::parse_schedule_kind(spec.parallel.schedule),
                                 groups.coord.pp, spec.parallel.pp, spec.grad_accum(),
                                 spec.parallel.virtual_stages);
}

model::GptOptions model_options(const config::JobSpec& spec, comm::ProcessGroups& groups,
                                const std::vector<parallel::Instruction>& program) {
  model::GptOptions o;
  o.shard = model::GptShardSpec::of(gpt_config(spec), spec.model.seq_len, spec.parallel.pp,
                                    groups.coord.pp, spec.parallel.virtual_stages, spec.parallel.tp,
                                    groups.coord.tp);
  o.tp = groups.tp.get();
  o.slots = program.empty() ? 1 : parallel::activation_slots_needed(program);
  o.recompute = model::parse_recompute(spec.training.activation_checkpointing);
  // ZeRO-3 keeps only shards of the parameters (data_parallel_options: zero applies with
  // dp > 1 only).
  o.unbound_params = spec.parallel.zero == 3 && groups.dp->size() > 1;
  return o;
}

parallel::DataParallelOptions data_parallel_options(const config::JobSpec& spec,
                                                    comm::ProcessGroups& groups,
                                                    const model::Gpt& gpt) {
  parallel::DataParallelOptions o;
  o.zero_stage = groups.dp->size() > 1 ? spec.parallel.zero : 0;
  o.sync.buckets.bucket_bytes = static_cast<size_t>(spec.parallel.bucket_mb * (1 << 20));
  o.sync.dtype = parallel::parse_grad_comm_dtype(spec.parallel.grad_comm);
  if (groups.layout.tp * groups.layout.pp > 1) {
    o.norm.group = groups.world.get();
    o.norm.counted = parallel::norm_counted_ranges(gpt.params());
    o.norm.dp_stride = groups.layout.tp;
  }
  if (spec.parallel.grad_compression == "powersgd") {
    o.sync.powersgd =
        parallel::PowerSgdOptions{.rank = spec.parallel.powersgd_rank,
                                  .seed = spec.seed,
                                  .only_when_smaller = true,
                                  .warmup_steps = spec.parallel.powersgd_warmup_steps};
  }
  o.periodic.mode = parallel::parse_dp_sync_mode(spec.parallel.dp_sync);
  o.periodic.sync_every = spec.parallel.sync_every;
  o.periodic.outer_lr = spec.parallel.outer_lr;
  o.periodic.outer_momentum = spec.parallel.outer_momentum;
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
