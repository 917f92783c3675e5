// to_yaml: the resolved spec, written so that reading it back gives the same JobSpec.
#include <cstdio>
#include <sstream>

#include "config/load.h"
#include "config/number_text.h"

namespace trainctl::config {

namespace {

using detail::format_real;

// Strings are always double-quoted so that names like `true` or `123` stay strings, and
// every `$` is written `$$` so that a path like /data/$x reads back as written.
std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '$') {
      out += "$$";  // reading it back expands variables (config/variables.h): `$$` is a `$`
    } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {  // not printable in YAML
      char escape[8];
      std::snprintf(escape, sizeof escape, "\\x%02x", static_cast<unsigned>(c));
      out += escape;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

const char* boolean(bool value) { return value ? "true" : "false"; }

// One writer per top-level section, each ending its last line.
void write_model(std::ostream& y, const ModelSpec& m) {
  y << "model:\n  type: " << m.type << "\n";
  if (!m.preset.empty()) y << "  preset: " << m.preset << "\n";
  y << "  vocab_size: " << m.vocab_size << "\n  seq_len: " << m.seq_len
    << "\n  n_layer: " << m.n_layer << "\n  n_head: " << m.n_head << "\n  d_model: " << m.d_model
    << "\n";
  if (!m.init_from.empty()) y << "  init_from: " << quoted(m.init_from.string()) << "\n";
  if (!m.is_llama()) return;
  // As written, so that parsing this text gives this spec back; what an unset n_kv_head
  // or ffn_hidden resolves to is shown as a comment.
  if (m.n_kv_head > 0) {
    y << "  n_kv_head: " << m.n_kv_head << "\n";
  } else {
    y << "  # n_kv_head: " << m.kv_heads() << "  (unset: n_head)\n";
  }
  if (m.ffn_hidden > 0) {
    y << "  ffn_hidden: " << m.ffn_hidden << "\n";
  } else {
    y << "  # ffn_hidden: " << m.mlp_hidden() << "  (unset: from d_model and multiple_of)\n";
  }
  y << "  multiple_of: " << m.multiple_of << "\n  norm_eps: " << format_real(m.norm_eps)
    << "\n  rope_theta: " << format_real(m.rope_theta)
    << "\n  tie_embeddings: " << (m.tie_embeddings ? "true" : "false") << "\n";
}

// model.moe, after the model's other keys (only when MoE is on: absent means dense).
void write_moe(std::ostream& y, const ModelSpec& m) {
  const MoeSpec& e = m.moe;
  if (!e.enabled()) return;
  y << "  moe:\n    num_experts: " << e.num_experts << "\n    top_k: " << e.top_k << "\n";
  if (e.expert_ffn_hidden > 0) {
    y << "    expert_ffn_hidden: " << e.expert_ffn_hidden << "\n";
  } else {
    y << "    # expert_ffn_hidden: " << m.expert_hidden() << "  (unset: the dense MLP's width)\n";
  }
  y << "    shared_experts: " << e.shared_experts << "\n    score: " << e.score
    << "\n    balance: " << e.balance << "\n    aux_loss_coef: " << format_real(e.aux_loss_coef)
    << "\n    bias_update_rate: " << format_real(e.bias_update_rate)
    << "\n    capacity_factor: " << format_real(e.capacity_factor) << "\n    layers: " << e.layers
    << "\n";
}

void write_data(std::ostream& y, const DataSpec& d) {
  y << "data:\n  type: " << d.type << "\n";
  if (!d.path.empty()) y << "  path: " << quoted(d.path.string()) << "\n";
  y << "  val_fraction: " << format_real(d.val_fraction) << "\n";
  if (d.seed) y << "  seed: " << *d.seed << "\n";
  if (!d.sources.empty()) y << "  sources:\n";
  for (const DataSourceSpec& s : d.sources) {
    y << "    - {name: " << quoted(s.name) << ", path: " << quoted(s.path.string())
      << ", weight: " << format_real(s.weight) << ", type: " << s.type << "}\n";
  }
}

void write_parallel(std::ostream& y, const ParallelSpec& p) {
  y << "parallel:\n  dp: " << p.dp << "\n  tp: " << p.tp << "\n  pp: " << p.pp
    << "\n  schedule: " << p.schedule << "\n  virtual_stages: " << p.virtual_stages
    << "\n  zero: " << p.zero << "\n  grad_comm: " << p.grad_comm
    << "\n  bucket_mb: " << format_real(p.bucket_mb) << "\n";
  if (p.cp != 1) y << "  cp: " << p.cp << "\n";
  if (p.ep != 1) y << "  ep: " << p.ep << "\n";
  if (p.grad_compression != "none") y << "  grad_compression: " << p.grad_compression << "\n";
  if (p.sequence_parallel) y << "  sequence_parallel: true\n";
  if (p.grad_compression == "powersgd") {
    y << "  powersgd_rank: " << p.powersgd_rank
      << "\n  powersgd_warmup_steps: " << p.powersgd_warmup_steps << "\n";
  }
  if (p.dp_sync != "allreduce") {
    y << "  dp_sync: " << p.dp_sync << "\n  sync_every: " << p.sync_every << "\n";
    if (p.dp_sync == "diloco") {
      y << "  outer_lr: " << format_real(p.outer_lr)
        << "\n  outer_momentum: " << format_real(p.outer_momentum) << "\n";
    }
  }
  if (p.mode != "data_parallel") {
    y << "  mode: " << p.mode << "\n  parameter_server:\n    servers: " << p.ps_servers
      << "\n    max_staleness: " << p.ps_max_staleness << "\n";
  }
  if (p.stage_balance != "auto") y << "  stage_balance: " << p.stage_balance << "\n";
  if (!p.layers_per_stage.empty()) {
    y << "  layers_per_stage: [";
    for (size_t i = 0; i < p.layers_per_stage.size(); ++i)
      y << (i > 0 ? ", " : "") << p.layers_per_stage[i];
    y << "]\n";
  }
}

void write_training(std::ostream& y, const TrainingSpec& t) {
  y << "training:\n  steps: " << t.steps << "\n  micro_batch_size: " << t.micro_batch_size
    << "\n  global_batch_size: " << t.global_batch_size
    << "\n  grad_clip: " << format_real(t.grad_clip) << "\n  eval_every: " << t.eval_every
    << "\n  eval_batches: " << t.eval_batches << "\n  threads: " << t.threads
    << "\n  activation_checkpointing: " << t.activation_checkpointing << "\n";
}

void write_optimizer(std::ostream& y, const OptimizerSpec& o) {
  y << "optimizer:\n  type: " << o.type << "\n  lr: " << format_real(o.lr) << "\n  betas: ["
    << format_real(o.beta1) << ", " << format_real(o.beta2) << "]\n  eps: " << format_real(o.eps)
    << "\n  weight_decay: " << format_real(o.weight_decay) << "\n  warmup_steps: " << o.warmup_steps
    << "\n  decay: " << o.decay << "\n  min_lr: " << format_real(o.min_lr) << "\n";
}

void write_precision(std::ostream& y, const PrecisionSpec& p) {
  y << "precision:\n  compute: " << dtype_name(p.compute) << "\n";
  if (p.compute == DType::fp16) {
    y << "  loss_scale: " << format_real(p.loss_scale)
      << "\n  loss_scale_growth_steps: " << p.loss_scale_growth_steps << "\n";
  }
}

void write_checkpoint(std::ostream& y, const CheckpointSpec& c) {
  y << "checkpoint:\n  every_steps: " << c.every_steps
    << "\n  every_minutes: " << format_real(c.every_minutes) << "\n  keep_last: " << c.keep_last
    << "\n  async: " << boolean(c.async) << "\n  export_hf: " << boolean(c.export_hf) << "\n";
}

void write_logging(std::ostream& y, const LoggingSpec& l) {
  y << "logging:\n  every_steps: " << l.every_steps << "\n  tensorboard: " << boolean(l.tensorboard)
    << "\n";
  if (l.profiling()) {
    y << "  profile_steps: [" << l.profile_first << ", " << l.profile_last << "]\n";
  }
  if (l.mlflow.enabled()) {
    y << "  mlflow:\n    tracking_uri: " << quoted(l.mlflow.tracking_uri)
      << "\n    experiment: " << quoted(l.mlflow.experiment)
      << "\n    run_name: " << quoted(l.mlflow.run_name) << "\n";
  }
}

void write_runtime(std::ostream& y, const RuntimeSpec& r) {
  y << "runtime:\n  max_restarts: " << r.max_restarts
    << "\n  comm_timeout_s: " << format_real(r.comm_timeout_s)
    << "\n  comm_selftest: " << boolean(r.comm_selftest)
    << "\n  allreduce_algo: " << r.allreduce_algo << "\n";
  if (r.memory_limit_mb) y << "  memory_limit_mb: " << format_real(*r.memory_limit_mb) << "\n";
  // Left out at its defaults (off), so a spec without fault tolerance dumps as before; any
  // key given (min_replicas with enabled: false is accepted and ignored) is kept.
  const FaultToleranceSpec& ft = r.fault_tolerance;
  if (ft == FaultToleranceSpec{}) return;
  y << "  fault_tolerance:\n    enabled: " << boolean(ft.enabled)
    << "\n    min_replicas: " << ft.min_replicas
    << "\n    heartbeat_timeout_s: " << format_real(ft.heartbeat_timeout_s)
    << "\n    join_timeout_s: " << format_real(ft.join_timeout_s)
    << "\n    max_replica_restarts: " << ft.max_replica_restarts << "\n";
  if (!ft.replay.empty()) y << "    replay: " << quoted(ft.replay) << "\n";
}

}  // namespace

std::string to_yaml(const JobSpec& s) {
  std::ostringstream y;
  y << "# Resolved job spec: every key with the value in effect, paths absolute.\n";
  y << "name: " << quoted(s.name) << "\n";
  y << "run_dir: " << quoted(s.run_dir.string()) << "\n";
  y << "seed: " << s.seed << "\n";
  y << "device: " << to_string(s.device) << "\n";
  write_model(y, s.model);
  write_moe(y, s.model);
  write_data(y, s.data);
  write_parallel(y, s.parallel);
  write_training(y, s.training);
  write_optimizer(y, s.optimizer);
  write_precision(y, s.precision);
  write_checkpoint(y, s.checkpoint);
  write_logging(y, s.logging);
  write_runtime(y, s.runtime);
  return y.str();
}

}  // namespace trainctl::config
