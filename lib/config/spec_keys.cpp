#include "config/spec_keys.h"

#include <algorithm>
#include <utility>

namespace trainctl::config::detail {

namespace {

using Table = std::vector<std::pair<std::string, std::vector<std::string>>>;

const Table& table() {
  static const Table sections = {
      {"",
       {"name", "run_dir", "seed", "device", "model", "data", "parallel", "training", "optimizer",
        "precision", "checkpoint", "logging", "runtime"}},
      {"model",
       {"type", "preset", "vocab_size", "seq_len", "n_layer", "n_head", "d_model", "n_kv_head",
        "ffn_hidden", "multiple_of", "norm_eps", "rope_theta", "tie_embeddings", "moe",
        "init_from"}},
      {"model.moe",
       {"num_experts", "top_k", "expert_ffn_hidden", "shared_experts", "score", "balance",
        "aux_loss_coef", "bias_update_rate", "capacity_factor", "layers"}},
      {"data", {"type", "path", "val_fraction", "sources", "seed"}},
      {"parallel",
       {"dp",
        "tp",
        "pp",
        "schedule",
        "virtual_stages",
        "zero",
        "grad_comm",
        "bucket_mb",
        "dp_sync",
        "sync_every",
        "outer_lr",
        "outer_momentum",
        "grad_compression",
        "powersgd_rank",
        "powersgd_warmup_steps",
        "mode",
        "parameter_server",
        "stage_balance",
        "layers_per_stage",
        "cp",
        "ep",
        "sequence_parallel"}},
      {"parallel.parameter_server", {"servers", "max_staleness"}},
      {"training",
       {"steps", "micro_batch_size", "global_batch_size", "grad_clip", "eval_every", "eval_batches",
        "threads", "activation_checkpointing"}},
      {"optimizer",
       {"type", "lr", "betas", "eps", "weight_decay", "warmup_steps", "decay", "min_lr"}},
      {"precision", {"compute", "loss_scale", "loss_scale_growth_steps"}},
      {"checkpoint", {"every_steps", "every_minutes", "keep_last", "async", "export_hf"}},
      {"logging", {"every_steps", "tensorboard", "profile_steps", "mlflow"}},
      {"logging.mlflow", {"tracking_uri", "experiment", "run_name"}},
      {"runtime",
       {"max_restarts", "comm_timeout_s", "comm_selftest", "allreduce_algo", "memory_limit_mb",
        "fault_tolerance"}},
      {"runtime.fault_tolerance",
       {"enabled", "min_replicas", "heartbeat_timeout_s", "join_timeout_s", "max_replica_restarts",
        "replay"}},
  };
  return sections;
}

}  // namespace

const std::vector<std::string>& section_keys(const std::string& section_path) {
  static const std::vector<std::string> none;
  for (const auto& [path, keys] : table()) {
    if (path == section_path) return keys;
  }
  return none;
}

std::vector<std::string> key_in_other_sections(const std::string& section_path,
                                               const std::string& key) {
  std::vector<std::string> out;
  for (const auto& [path, keys] : table()) {
    if (path == section_path || std::find(keys.begin(), keys.end(), key) == keys.end()) continue;
    // A top-level key that is itself a section (`model`) is no suggestion for a value.
    if (!section_keys(path.empty() ? key : path + "." + key).empty()) continue;
    out.push_back(path.empty() ? key : path + "." + key);
  }
  return out;
}

}  // namespace trainctl::config::detail
