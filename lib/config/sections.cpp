#include "config/sections.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>

#include "config/number_text.h"
#include "config/presets.h"
#include "config/variables.h"
#include "config/yaml_reader.h"
#include "util/error.h"

namespace trainctl::config::detail {

namespace {

constexpr long long kMaxWorkersPerAxis = 4096;
constexpr size_t kMaxNameLength = 200;
// Beyond these a run diverges at once (lr) or the value is surely a typo; the ranges are
// wide enough for any real recipe (SGD on tiny models uses lr ~1, AdamW 1e-5..1e-2).
constexpr double kMaxLearningRate = 10.0;
constexpr double kMaxWeightDecay = 10.0;
constexpr double kMaxEps = 1.0;
constexpr double kMaxGradClip = 1e6;
constexpr double kMaxCommTimeoutS = 7 * 24 * 3600.0;   // a week
constexpr double kMaxFaultToleranceTimeoutS = 3600.0;  // an hour

// The name becomes a directory (runs/<name>) and appears in file names and logs.
void check_name(const MapReader& top, const std::string& name) {
  const bool plain = std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
  });
  if (!plain || name.front() == '.') {
    top.fail_at("name",
                "must be a plain name (letters, digits, '.', '_', '-'; not starting with "
                "'.') because it names the run directory; got \"" +
                    name + "\".");
  }
  // Longer would fail only when run_dir is created ("File name too long"), after validate
  // said ok; NAME_MAX (255) less room for suffixes like ".tmp.<node>.<pid>".
  if (name.size() > kMaxNameLength) {
    top.fail_at("name", "is " + std::to_string(name.size()) + " characters long; at most " +
                            std::to_string(kMaxNameLength) +
                            " (it names the run directory, and file systems allow 255 bytes "
                            "per name).");
  }
}

// `every_N` / `from_K` with N >= 1, K >= 0; false for anything else.
bool parse_layer_pattern(const std::string& text, const std::string& prefix, int min, int& out) {
  if (text.rfind(prefix, 0) != 0 || text.size() == prefix.size() ||
      text.size() > prefix.size() + 6) {
    return false;
  }
  const std::string digits = text.substr(prefix.size());
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return false;
  }
  out = std::stoi(digits);
  return out >= min;
}

void read_moe(const MapReader& model_reader, MoeSpec& moe) {
  const MapReader r = model_reader.section("moe");
  r.read("num_experts", moe.num_experts, {1, 1 << 16});
  r.read("top_k", moe.top_k, {1, 1 << 16});
  r.read("expert_ffn_hidden", moe.expert_ffn_hidden, {1, 1 << 20});
  r.read("shared_experts", moe.shared_experts, {0, 1 << 10});
  r.read_choice("score", moe.score, {"softmax", "sigmoid"});
  r.read_choice("balance", moe.balance, {"aux_loss", "bias", "none"},
                {{"aux", "aux_loss"}, {"off", "none"}});
  r.read("aux_loss_coef", moe.aux_loss_coef, {0, false, 1e3, false});
  r.read("bias_update_rate", moe.bias_update_rate, {0, false, 1, false});
  r.read("capacity_factor", moe.capacity_factor, {0, false, 1e3, false});
  r.read("layers", moe.layers);
  if (moe.layers == "all") {
    moe.layers_every = 1;
    moe.layers_from = 0;
  } else if (parse_layer_pattern(moe.layers, "every_", 1, moe.layers_every)) {
    moe.layers_from = 0;
  } else if (parse_layer_pattern(moe.layers, "from_", 0, moe.layers_from)) {
    moe.layers_every = 1;
  } else {
    r.fail_at("layers",
              "must be all, every_N (every N-th layer: N-1, 2N-1, ...) or from_K "
              "(layers K and above, counted from 0); got \"" +
                  moe.layers + "\".");
  }
  for (const char* key : {"top_k", "expert_ffn_hidden", "shared_experts", "score", "balance",
                          "aux_loss_coef", "bias_update_rate", "capacity_factor", "layers"}) {
    // With model.init_from, config.json may supply num_experts (Mixtral).
    if (!r.has("num_experts") && r.has(key) && !model_reader.has("init_from")) {
      r.fail_at(key, "needs model.moe.num_experts (the experts per MoE layer); add it.");
    }
  }
}

void read_model(const MapReader& top, Locations& locations, ModelSpec& model) {
  const MapReader r = top.section("model");
  std::string preset;
  r.read_choice("preset", preset, preset_names(),
                {{"gpt2", "gpt2-124m"},
                 {"gpt2-small", "gpt2-124m"},
                 {"tiny", "gpt-tiny"},
                 {"llama3", "llama3-8b"},
                 {"llama-3-8b", "llama3-8b"}});
  if (!preset.empty()) {
    model = *find_preset(preset);
    // Dimensions the preset supplies are blamed on the preset line in cross-field messages.
    for (const char* dim : {"type", "vocab_size", "seq_len", "n_layer", "n_head", "d_model",
                            "n_kv_head", "ffn_hidden", "rope_theta"}) {
      locations.remember(r.path_of(dim), r.where("preset"));
    }
  }
  r.read_choice("type", model.type, {"gpt", "llama"});
  r.read("vocab_size", model.vocab_size, {2, 1 << 24});
  r.read("seq_len", model.seq_len, {1, 1 << 20});
  r.read("n_layer", model.n_layer, {1, 1024});
  r.read("n_head", model.n_head, {1, 1024});
  r.read("d_model", model.d_model, {1, 1 << 16});
  // The Llama family's own keys mean nothing to GPT: refuse them rather than ignore them.
  for (const char* key :
       {"n_kv_head", "ffn_hidden", "multiple_of", "norm_eps", "rope_theta", "tie_embeddings"}) {
    if (!model.is_llama() && r.has(key) && !r.has("init_from")) {
      r.fail_at(key, "applies to model.type llama only (this model is " + model.type +
                         "); remove it, or set model.type: llama.");
    }
  }
  r.read("n_kv_head", model.n_kv_head, {1, 1024});
  r.read("ffn_hidden", model.ffn_hidden, {1, 1 << 20});
  r.read("multiple_of", model.multiple_of, {1, 1 << 16});
  r.read("norm_eps", model.norm_eps, {0, true, 1, true});
  r.read("rope_theta", model.rope_theta, {1, false, 1e9, false});
  r.read("tie_embeddings", model.tie_embeddings);
  read_moe(r, model.moe);
  r.read("init_from", model.init_from);
}

void read_data(const MapReader& top, DataSpec& data) {
  const MapReader r = top.section("data");
  r.read_choice("type", data.type, {"synthetic", "text", "tokens", "blend"},
                {{"random", "synthetic"}, {"txt", "text"}, {"bin", "tokens"}, {"mix", "blend"}});
  r.read("path", data.path);
  r.read("val_fraction", data.val_fraction, {0, false, 1, true});
  if (r.has("seed")) {
    uint64_t seed = 0;
    r.read("seed", seed);
    data.seed = seed;
  }
  for (const MapReader& item : r.list_of_maps("sources", {"name", "path", "weight", "type"})) {
    DataSourceSpec source;
    item.read("path", source.path);
    item.read("weight", source.weight, {0, false, 1e12, false});
    item.read("name", source.name);
    item.read_choice("type", source.type, {"text", "tokens"}, {{"txt", "text"}, {"bin", "tokens"}});
    if (!item.has("path")) item.fail_at("path", "is required for each source of a blend.");
    if (!item.has("weight")) item.fail_at("weight", "is required for each source of a blend.");
    if (source.name.empty()) {
      const std::filesystem::path p = source.path.lexically_normal();
      source.name = (p.has_filename() ? p.filename() : p.parent_path().filename()).string();
    }
    data.sources.push_back(std::move(source));
  }
}

// parallel.dp_sync and the keys only its periodic modes use.
void read_dp_sync(const MapReader& r, ParallelSpec& parallel) {
  r.read_choice("dp_sync", parallel.dp_sync, {"allreduce", "local_sgd", "diloco"},
                {{"sync", "allreduce"}, {"localsgd", "local_sgd"}, {"local", "local_sgd"}});
  r.read("sync_every", parallel.sync_every, {1, 1 << 20});
  r.read("outer_lr", parallel.outer_lr, {0, true, kMaxLearningRate, false});
  r.read("outer_momentum", parallel.outer_momentum, {0, false, 1, true});
  if (r.has("sync_every") && parallel.dp_sync == "allreduce") {
    r.fail_at("sync_every",
              "is used only with dp_sync: local_sgd or diloco (allreduce synchronises every "
              "step); remove it or set parallel.dp_sync.");
  }
  for (const char* key : {"outer_lr", "outer_momentum"}) {
    if (r.has(key) && parallel.dp_sync != "diloco") {
      r.fail_at(key,
                "is used only with dp_sync: diloco (the outer optimizer); remove it or set "
                "parallel.dp_sync: diloco.");
    }
  }
}

// parallel.grad_compression (with grad_comm, its older spelling of bf16) and the powersgd_*
// keys.
void read_grad_compression(const MapReader& r, ParallelSpec& parallel) {
  r.read_choice(
      "grad_compression", parallel.grad_compression, {"none", "bf16", "powersgd"},
      {{"fp32", "none"}, {"off", "none"}, {"bfloat16", "bf16"}, {"power_sgd", "powersgd"}});
  r.read("powersgd_rank", parallel.powersgd_rank, {1, 1 << 16});
  r.read("powersgd_warmup_steps", parallel.powersgd_warmup_steps, {0});
  for (const char* key : {"powersgd_rank", "powersgd_warmup_steps"}) {
    if (r.has(key) && parallel.grad_compression != "powersgd") {
      r.fail_at(key,
                "is used only with grad_compression: powersgd; remove it or set "
                "parallel.grad_compression: powersgd.");
    }
  }
  if (parallel.grad_compression == "bf16") {
    if (r.has("grad_comm") && parallel.grad_comm != "bf16") {
      r.fail_at("grad_comm", "says fp32 but grad_compression says bf16; keep one of them.");
    }
    parallel.grad_comm = "bf16";
  } else if (r.has("grad_compression") && parallel.grad_comm == "bf16") {
    r.fail_at("grad_comm", "bf16 contradicts grad_compression: " + parallel.grad_compression +
                               " (PowerSGD's factors travel in fp32); keep one of them.");
  }
}

// parallel.mode and its parameter_server section.
void read_parallel_mode(const MapReader& r, ParallelSpec& parallel) {
  r.read_choice("mode", parallel.mode, {"data_parallel", "parameter_server"},
                {{"dp", "data_parallel"},
                 {"ddp", "data_parallel"},
                 {"ps", "parameter_server"},
                 {"parameter_servers", "parameter_server"}});
  const MapReader ps = r.section("parameter_server");
  ps.read("servers", parallel.ps_servers, {1, 1024});
  ps.read("max_staleness", parallel.ps_max_staleness, {0, 1 << 20});
  if (r.has("parameter_server") && parallel.mode != "parameter_server") {
    r.fail_at("parameter_server",
              "is used only with mode: parameter_server; remove it or set "
              "parallel.mode: parameter_server.");
  }
}

void read_parallel(const MapReader& top, ParallelSpec& parallel) {
  const MapReader r = top.section("parallel");
  r.read("dp", parallel.dp, {1, kMaxWorkersPerAxis});
  r.read("tp", parallel.tp, {1, kMaxWorkersPerAxis});
  r.read("pp", parallel.pp, {1, kMaxWorkersPerAxis});
  r.read("cp", parallel.cp, {1, kMaxWorkersPerAxis});
  r.read_choice(
      "schedule", parallel.schedule, {"gpipe", "1f1b", "interleaved", "zb1p", "zbv"},
      {{"one_f_one_b", "1f1b"}, {"pipedream", "1f1b"}, {"interleaved_1f1b", "interleaved"}});
  r.read("virtual_stages", parallel.virtual_stages, {1, 64});
  r.read_choice("zero", parallel.zero, {0, 1, 2, 3});
  r.read_choice("grad_comm", parallel.grad_comm, {"fp32", "bf16"},
                {{"bfloat16", "bf16"}, {"float32", "fp32"}});
  r.read("bucket_mb", parallel.bucket_mb, {0, true, 1024, false});
  read_dp_sync(r, parallel);
  read_grad_compression(r, parallel);
  read_parallel_mode(r, parallel);
  r.read_choice("stage_balance", parallel.stage_balance, {"auto", "equal"},
                {{"balanced", "auto"}, {"cost", "auto"}, {"even", "equal"}, {"uniform", "equal"}});
  r.read_list("layers_per_stage", parallel.layers_per_stage, {0, 1 << 20});
  r.read("ep", parallel.ep, {1, kMaxWorkersPerAxis});
  r.read("sequence_parallel", parallel.sequence_parallel);
}

void read_training(const MapReader& top, const ParallelSpec& parallel, TrainingSpec& training) {
  const MapReader r = top.section("training");
  r.read("steps", training.steps, {1});
  r.read("micro_batch_size", training.micro_batch_size, {1, 1 << 20});
  // Without an explicit global batch there is no accumulation: one micro-batch per DP rank.
  const long long no_accumulation = 1LL * training.micro_batch_size * parallel.dp;
  if (no_accumulation <= std::numeric_limits<int>::max()) {
    training.global_batch_size = static_cast<int>(no_accumulation);
  }
  r.read("global_batch_size", training.global_batch_size, {1});
  r.read("grad_clip", training.grad_clip, {0, false, kMaxGradClip, false});
  r.read("eval_every", training.eval_every, {0});
  r.read("eval_batches", training.eval_batches, {0});
  r.read("threads", training.threads, {1, 1024});
  r.read_choice("activation_checkpointing", training.activation_checkpointing,
                {"none", "selective", "full"},
                {{"off", "none"}, {"false", "none"}, {"true", "full"}, {"on", "full"}});
}

void read_optimizer(const MapReader& top, OptimizerSpec& opt) {
  const MapReader r = top.section("optimizer");
  r.read_choice("type", opt.type, {"adamw", "sgd"}, {{"adam", "adamw"}});
  r.read("lr", opt.lr, {0, true, kMaxLearningRate, false});
  r.read_pair("betas", opt.beta1, opt.beta2, {0, false, 1, true});
  r.read("eps", opt.eps, {0, true, kMaxEps, false});
  r.read("weight_decay", opt.weight_decay, {0, false, kMaxWeightDecay, false});
  r.read("warmup_steps", opt.warmup_steps, {0});
  r.read_choice("decay", opt.decay, {"cosine", "linear", "constant"},
                {{"cos", "cosine"}, {"none", "constant"}, {"const", "constant"}});
  r.read("min_lr", opt.min_lr, {0, false, kMaxLearningRate, false});
}

void read_precision(const MapReader& top, PrecisionSpec& precision) {
  const MapReader r = top.section("precision");
  std::string compute = dtype_name(precision.compute);
  r.read_choice("compute", compute, {"fp32", "bf16", "fp16"},
                {{"float32", "fp32"},
                 {"float", "fp32"},
                 {"bfloat16", "bf16"},
                 {"float16", "fp16"},
                 {"half", "fp16"}});
  precision.compute = compute == "bf16"   ? DType::bf16
                      : compute == "fp16" ? DType::fp16
                                          : DType::fp32;
  r.read("loss_scale", precision.loss_scale, {1.0, false, 16777216.0, false});
  r.read("loss_scale_growth_steps", precision.loss_scale_growth_steps, {1});
  for (const char* key : {"loss_scale", "loss_scale_growth_steps"}) {
    if (r.has(key) && precision.compute != DType::fp16) {
      r.fail_at(key,
                "loss scaling is only used with compute: fp16 (fp32 and bf16 have fp32's "
                "exponent range); remove it or set precision.compute: fp16");
    }
  }
}

void read_checkpoint(const MapReader& top, CheckpointSpec& checkpoint) {
  const MapReader r = top.section("checkpoint");
  r.read("every_steps", checkpoint.every_steps, {0});
  r.read("every_minutes", checkpoint.every_minutes, {0});
  r.read("keep_last", checkpoint.keep_last, {1, 1000000});
  r.read("async", checkpoint.async);
  r.read("export_hf", checkpoint.export_hf);
}

void read_logging(const MapReader& top, const TrainingSpec& training, LoggingSpec& logging) {
  const MapReader r = top.section("logging");
  r.read("every_steps", logging.every_steps, {1});
  r.read("tensorboard", logging.tensorboard);
  if (!r.has("profile_steps")) return;
  double first = 1, last = 1;
  r.read_pair("profile_steps", first, last, {1, false, 1e9, false});
  if (first != std::floor(first) || last != std::floor(last) || last < first) {
    r.fail_at("profile_steps",
              "expected [A, B]: whole step numbers with 1 <= A <= B (steps A..B are profiled); "
              "got [" +
                  format_real(first) + ", " + format_real(last) + "].");
  }
  if (last > training.steps) {
    r.fail_at("profile_steps", "B must be <= training.steps (" + std::to_string(training.steps) +
                                   "); got [" + format_real(first) + ", " + format_real(last) +
                                   "]. Profile a few steps after the first, e.g. [3, 4].");
  }
  logging.profile_first = static_cast<int>(first);
  logging.profile_last = static_cast<int>(last);
}

// logging.mlflow: MLflow's REST API needs a server (`mlflow server`), so only http(s) URIs;
// file: and databricks URIs of the Python client are refused with what to do instead.
void read_mlflow(const MapReader& top, const std::string& job_name, MlflowSpec& mlflow) {
  const MapReader logging = top.section("logging");
  if (!logging.has("mlflow")) return;
  const MapReader r = logging.section("mlflow");
  if (!r.has("tracking_uri")) {
    logging.fail_at("mlflow",
                    "needs tracking_uri: the address of an MLflow tracking server, e.g. "
                    "{tracking_uri: http://mlflow.example:5000}");
  }
  r.read("tracking_uri", mlflow.tracking_uri);
  if (mlflow.tracking_uri.rfind("http://", 0) != 0 &&
      mlflow.tracking_uri.rfind("https://", 0) != 0) {
    r.fail_at("tracking_uri", "is " + mlflow.tracking_uri +
                                  "; trainctl talks to MLflow over its REST API, so it needs a "
                                  "tracking server's http:// or https:// address (start one with "
                                  "`mlflow server --host 0.0.0.0 --port 5000`).");
  }
  mlflow.experiment = job_name;
  mlflow.run_name = job_name;
  r.read("experiment", mlflow.experiment);
  r.read("run_name", mlflow.run_name);
}

// runtime.fault_tolerance (docs/job-spec.md, "runtime.fault_tolerance"). Its keys are read
// whether or not it is enabled; what needs enabled is validate's (validate_fault_tolerance.cpp).
// replay is a path: `~` and the one rule for relative paths (Locations::base_dir) apply here,
// as load.cpp applies them to data.path, so that the spec holds it absolute.
void read_fault_tolerance(const MapReader& runtime_reader, const Locations& locations,
                          FaultToleranceSpec& ft) {
  const MapReader r = runtime_reader.section("fault_tolerance");
  r.read("enabled", ft.enabled);
  r.read("min_replicas", ft.min_replicas, {1, kMaxWorkersPerAxis});
  r.read("heartbeat_timeout_s", ft.heartbeat_timeout_s,
         {0, true, kMaxFaultToleranceTimeoutS, false});
  r.read("join_timeout_s", ft.join_timeout_s, {0, true, kMaxFaultToleranceTimeoutS, false});
  r.read("max_replica_restarts", ft.max_replica_restarts, {0, 1000});
  if (!r.has("replay")) return;
  std::filesystem::path replay;
  r.read("replay", replay);
  const std::string key = r.path_of("replay");
  std::filesystem::path expanded;
  try {
    expanded = expand_home(replay.string(), process_environment());
  } catch (const InputError& e) {
    r.fail_at("replay", e.what());
  }
  if (!expanded.is_absolute()) expanded = locations.base_dir(key) / expanded;
  ft.replay = expanded.lexically_normal().string();
}

void read_runtime(const MapReader& top, const Locations& locations, RuntimeSpec& runtime) {
  const MapReader r = top.section("runtime");
  r.read("max_restarts", runtime.max_restarts, {0, 1000});
  r.read("comm_timeout_s", runtime.comm_timeout_s, {0, true, kMaxCommTimeoutS, false});
  r.read("comm_selftest", runtime.comm_selftest);
  r.read_choice("allreduce_algo", runtime.allreduce_algo,
                {"auto", "direct", "ring", "gloo_ring", "ring_chunked", "halving_doubling", "shm",
                 "hierarchical"},
                {{"automatic", "auto"}});
  if (r.has("memory_limit_mb")) {
    double limit = 0;
    r.read("memory_limit_mb", limit, {0, true});
    runtime.memory_limit_mb = limit;
  }
  read_fault_tolerance(r, locations, runtime.fault_tolerance);
}

}  // namespace

JobSpec read_job_spec(const YAML::Node& root, Locations& locations) {
  const MapReader top = MapReader::job_spec(root, locations);
  JobSpec spec;
  top.read("name", spec.name);
  check_name(top, spec.name);
  top.read("run_dir", spec.run_dir);
  top.read("seed", spec.seed);
  std::string device = to_string(spec.device);
  top.read_choice("device", device, {"cpu", "cuda"}, {{"gpu", "cuda"}, {"nvidia", "cuda"}});
  spec.device = device == "cuda" ? Device::cuda : Device::cpu;
  read_model(top, locations, spec.model);
  read_data(top, spec.data);
  read_parallel(top, spec.parallel);
  read_training(top, spec.parallel, spec.training);
  read_optimizer(top, spec.optimizer);
  read_precision(top, spec.precision);
  read_checkpoint(top, spec.checkpoint);
  read_logging(top, spec.training, spec.logging);
  read_mlflow(top, spec.name, spec.logging.mlflow);
  read_runtime(top, locations, spec.runtime);
  return spec;
}

}  // namespace trainctl::config::detail
