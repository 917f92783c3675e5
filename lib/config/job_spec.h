#pragma once
// The job spec as plain typed structs. YAML is parsed into these once, at the edge
// (config/load.h); nothing below the CLI ever sees YAML. Defaults live here.
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "util/dtype.h"
#include "util/layout.h"

namespace trainctl::config {

// model.moe: the feed-forward of the selected layers as a mixture of experts
// (docs/job-spec.md, "model.moe"). Absent (num_experts 0): every layer dense.
struct MoeSpec {
  int num_experts = 0;
  int top_k = 2;
  int expert_ffn_hidden = 0;  // 0 = the dense MLP's width (model.mlp_hidden())
  int shared_experts = 0;
  std::string score = "softmax";     // softmax | sigmoid
  std::string balance = "aux_loss";  // aux_loss | bias | none
  double aux_loss_coef = 0.01;
  double bias_update_rate = 1.0e-3;
  double capacity_factor = 0;  // 0 = dropless
  std::string layers = "all";  // all | every_N | from_K
  // `layers` as numbers (config/sections.cpp checked its form): a layer l is MoE when
  // l >= layers_from and (l - layers_from + 1) % layers_every == 0.
  int layers_every = 1;
  int layers_from = 0;

  bool enabled() const { return num_experts > 0; }
  bool operator==(const MoeSpec&) const = default;
};

struct ModelSpec {
  std::string type = "gpt";  // gpt | llama
  std::string preset;        // "" = explicit dims; else a name from config/presets.h
  int vocab_size = 256;
  int seq_len = 128;
  int n_layer = 2;
  int n_head = 4;
  int d_model = 128;
  // Llama family only (validate refuses them for gpt).
  int n_kv_head = 0;   // grouped-query attention's k/v heads; 0 = n_head
  int ffn_hidden = 0;  // SwiGLU width; 0 = from multiple_of, as Meta's Llama computes it
  int multiple_of = 256;
  double norm_eps = 1e-5;       // RMSNorm epsilon
  double rope_theta = 10000;    // rotary embedding base
  bool tie_embeddings = false;  // LM head shares the token embedding (gpt: always)
  MoeSpec moe;
  // A Hugging Face model folder to start from (config/init_from.h); absolute after
  // resolution, empty = random initialisation.
  std::filesystem::path init_from;

  bool is_llama() const { return type == "llama"; }
  int kv_heads() const { return n_kv_head > 0 ? n_kv_head : n_head; }
  // The MLP's hidden width: 4 d_model for gpt; for llama ffn_hidden, or Meta's rule
  // multiple_of * ceil((8 d_model / 3) / multiple_of).
  int mlp_hidden() const {
    if (!is_llama()) return 4 * d_model;
    if (ffn_hidden > 0) return ffn_hidden;
    const int h = 2 * (4 * d_model) / 3;
    return multiple_of * ((h + multiple_of - 1) / multiple_of);
  }
  int expert_hidden() const {
    return moe.expert_ffn_hidden > 0 ? moe.expert_ffn_hidden : mlp_hidden();
  }
  bool moe_layer(int l) const {
    return moe.enabled() && l >= moe.layers_from &&
           (l - moe.layers_from + 1) % moe.layers_every == 0;
  }

  bool operator==(const ModelSpec&) const = default;
};

// One source of a blend (data.type blend): text or tokens data drawn in proportion to its
// weight (data/blend.h).
struct DataSourceSpec {
  std::string name;            // default: the path's last component
  std::filesystem::path path;  // absolute (config/load.h: the path rule)
  double weight = 0.0;
  std::string type = "tokens";  // text | tokens
  bool operator==(const DataSourceSpec&) const = default;
};

struct DataSpec {
  std::string type = "synthetic";       // synthetic | text | tokens | blend
  std::filesystem::path path;           // text/tokens: absolute (config/load.h: the path rule)
  double val_fraction = 0.05;           // tail of the corpus held out for validation
  std::vector<DataSourceSpec> sources;  // blend only
  std::optional<uint64_t> seed;         // blend: the schedule's seed (default: the job's)

  bool operator==(const DataSpec&) const = default;
};

// dp, tp and pp (the Layout), and how the work is split within it.
struct ParallelSpec : Layout {
  std::string schedule = "1f1b";  // gpipe | 1f1b | interleaved | zb1p | zbv
  // Model chunks per pipeline rank for the interleaved schedule (Megatron's virtual
  // pipeline stages); 1 for gpipe and 1f1b.
  int virtual_stages = 1;
  int zero = 0;                    // 0 | 1 | 2 | 3
  std::string grad_comm = "fp32";  // fp32 | bf16: dtype of DP gradient traffic
  double bucket_mb = 1.0;          // DP gradient bucket cap (MiB); buckets hold half-layers
  // How DP replicas agree (parallel/periodic_sync.h): allreduce sums gradients every step;
  // local_sgd and diloco let each replica step on its own gradients and meet every
  // sync_every steps (local_sgd: parameters averaged; diloco: an outer Nesterov step of
  // outer_lr / outer_momentum on the averaged parameter change).
  std::string dp_sync = "allreduce";
  int sync_every = 1;
  // Defaults measured for small H (docs/communication-efficient-dp.md): the paper's 0.7 /
  // 0.9 are for H in the hundreds and diverge at H = 8.
  double outer_lr = 0.9;
  double outer_momentum = 0.3;
  // none | bf16 | powersgd: how DP gradients are compressed on the wire. bf16 is grad_comm:
  // bf16 under its newer name (both keys are read; they must agree); powersgd sends each 2-D
  // gradient as rank-`powersgd_rank` factors with error feedback (parallel/powersgd.h).
  std::string grad_compression = "none";
  int powersgd_rank = 4;
  // PowerSGD's first optimizer steps summed uncompressed (PyTorch's start_powerSGD_iter);
  // see docs/communication-efficient-dp.md for the default.
  int powersgd_warmup_steps = 0;
  // Megatron's sequence parallelism (needs tp > 1 dividing model.seq_len): norms and
  // residual adds hold seq_len / tp of the tokens per TP rank; each TP allreduce becomes a
  // reduce-scatter + all-gather (model/model_context.h).
  bool sequence_parallel = false;
  // data_parallel | parameter_server. parameter_server: the dp workers push gradients to
  // `servers` server processes, each holding a shard of the parameters and of AdamW's
  // state, and pull fresh parameters back, asynchronously within `max_staleness` updates
  // (lib/ps/staleness_rule.h; 0 = synchronous).
  std::string mode = "data_parallel";
  int ps_servers = 1;
  int ps_max_staleness = 0;
  // How pipeline stages divide the blocks (model/shard.h): auto balances the stages' cost
  // (blocks, the embedding on the first, the LM head and loss on the last); equal gives each
  // of the pp × virtual_stages stages n_layer / (pp × virtual_stages). layers_per_stage (one
  // count per stage, per virtual stage with interleaving) overrides both.
  std::string stage_balance = "auto";
  std::vector<int> layers_per_stage;

  bool operator==(const ParallelSpec&) const = default;
};

struct TrainingSpec {
  int steps = 100;
  int micro_batch_size = 8;
  // = micro_batch_size * grad_accum * dp; a spec that leaves it out gets micro_batch_size * dp.
  int global_batch_size = 8;
  double grad_clip = 1.0;  // 0 disables clipping
  int eval_every = 0;      // 0 disables evaluation
  int eval_batches = 4;
  int threads = 1;  // compute threads per worker
  // none | selective | full: what each transformer block keeps for its backward and what
  // it recomputes instead (model/gpt.h, Recompute).
  std::string activation_checkpointing = "none";

  bool operator==(const TrainingSpec&) const = default;
};

struct OptimizerSpec {
  std::string type = "adamw";
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
  int warmup_steps = 0;
  std::string decay = "cosine";  // cosine | linear | constant
  double min_lr = 0.0;

  bool operator==(const OptimizerSpec&) const = default;
};

struct PrecisionSpec {
  DType compute = DType::fp32;
  // fp16 only: dynamic loss scaling (optim/loss_scaler.h) starts at loss_scale and doubles
  // after loss_scale_growth_steps finite steps in a row.
  double loss_scale = 65536.0;
  int loss_scale_growth_steps = 1000;

  bool operator==(const PrecisionSpec&) const = default;
};

// Checkpoints go to run_dir/checkpoints/step_<NNNNNNNN>/: every `every_steps` steps and/or
// every `every_minutes` minutes (0 disables either), when a stop signal arrives (Slurm
// preemption), and at the end of training.
struct CheckpointSpec {
  int every_steps = 0;
  double every_minutes = 0;
  int keep_last = 3;
  bool async = true;  // write in the background while training continues
  // After training ends (every step done), also write run_dir/hf/: the final checkpoint as
  // a Hugging Face folder (`trainctl ckpt export --format hf`). GPT models only.
  bool export_hf = false;

  bool operator==(const CheckpointSpec&) const = default;
};

// logging.mlflow: global rank 0 also sends the resolved spec (params), every logged metrics
// line and the run's status to an MLflow tracking server over its REST API, never waiting on
// it (observe/mlflow_tracker.h); at the end node 0 uploads the report and the config as
// artifacts. An empty tracking_uri: off. experiment and run_name default to the job's name.
struct MlflowSpec {
  std::string tracking_uri;
  std::string experiment;
  std::string run_name;
  bool enabled() const { return !tracking_uri.empty(); }
  bool operator==(const MlflowSpec&) const = default;
};

struct LoggingSpec {
  int every_steps = 10;
  // Global rank 0 also writes every logged step's metrics as TensorBoard scalars, and the
  // resolved spec as text, to run_dir/tb/ (observe/tensorboard_writer.h).
  bool tensorboard = true;
  // `profile_steps: [A, B]` (or `train --profile A:B`): every rank records a timeline of
  // steps A..B (1-based, inclusive), merged into run_dir/trace.json at the end of the run
  // (observe/trace_recorder.h). 0, 0: off.
  int profile_first = 0;
  int profile_last = 0;
  bool profiling() const { return profile_first > 0; }
  MlflowSpec mlflow;

  bool operator==(const LoggingSpec&) const = default;
};

// runtime.fault_tolerance: the DP dimension as replica groups that keep training when one
// dies (docs/fault-tolerance.md; lib/launch/ft_quorum.h, lib/train/elastic_training.h).
struct FaultToleranceSpec {
  bool enabled = false;
  // Fewer live replicas than this: the job stops and restarts from its checkpoint, as
  // without fault tolerance (runtime.max_restarts).
  int min_replicas = 1;
  // A replica whose leader has not beaten for this long is taken as dead (a hung one; a
  // dead process is known at once from its launcher).
  double heartbeat_timeout_s = 10;
  // How long a new membership waits for the replicas it expects before forming without them.
  double join_timeout_s = 60;
  // Restarts of each replica's processes by its launcher (the job's own restarts are
  // runtime.max_restarts).
  int max_replica_restarts = 10;
  // A membership record (run_dir/membership.jsonl of a fault-tolerant run): train without
  // failures, each step counting only the replicas recorded for it ("" off).
  std::string replay;

  bool operator==(const FaultToleranceSpec&) const = default;
};

struct RuntimeSpec {
  int max_restarts = 0;
  double comm_timeout_s = 300;
  bool comm_selftest = true;  // verify every group's collectives before training
  // Allreduce algorithm: auto (chosen per message size from measurements on loopback)
  // | direct | ring | gloo_ring | ring_chunked | halving_doubling | shm | hierarchical.
  std::string allreduce_algo = "auto";
  // Tensor memory a worker may plan to use (MiB); a job whose estimate (`trainctl plan`)
  // exceeds it is refused before launch. Unset: this node's memory divided by its workers
  // (device: cuda: the GPU's memory).
  std::optional<double> memory_limit_mb;
  FaultToleranceSpec fault_tolerance;

  bool operator==(const RuntimeSpec&) const = default;
};

struct JobSpec {
  std::filesystem::path spec_path;  // the YAML file it came from ("" for built-ins)
  std::string name = "job";
  std::filesystem::path run_dir;  // absolute after resolution
  uint64_t seed = 1234;
  Device device = Device::cpu;
  ModelSpec model;
  DataSpec data;
  ParallelSpec parallel;
  TrainingSpec training;
  OptimizerSpec optimizer;
  PrecisionSpec precision;
  CheckpointSpec checkpoint;
  LoggingSpec logging;
  RuntimeSpec runtime;

  // Where the keys that checks made after loading point at (model.vocab_size, data.path)
  // were given: "job.yaml:3:30", a `--set` argument, or the enclosing section for a default.
  // Not part of the configuration (operator== ignores it).
  std::map<std::string, std::string> key_origins;
  // key_origins' entry for key_path, else the spec file's name.
  std::string where(const std::string& key_path) const;

  int world_size() const { return parallel.world_size(); }
  int grad_accum() const {
    return training.global_batch_size / (training.micro_batch_size * parallel.dp);
  }

  // Equal configuration: every field but spec_path (where the spec was read from is not part
  // of it), so a resolved spec read back from run_dir equals the one that was written.
  bool operator==(const JobSpec& other) const;
};

const char* to_string(Device d);  // "cpu", "cuda"; dtype names: dtype_name (util/dtype.h)

}  // namespace trainctl::config
