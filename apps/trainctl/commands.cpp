#include "commands.h"

#include <spdlog/spdlog.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <system_error>

#include "checkpoint/commit.h"
#include "checkpoint/errors.h"
#include "checkpoint/metadata.h"
#include "ckpt_commands.h"
#include "comm/rank_coords.h"
#include "config/load.h"
#include "device/cuda_plugin.h"
#include "launch/launcher.h"
#include "launch/rank_map.h"
#include "memory_check.h"
#include "model/shard.h"
#include "ops/cpu/isa.h"
#include "parallel/pipeline_schedule.h"
#include "plan/cluster_spec.h"
#include "plan/cost_model.h"
#include "plan/memory_plan.h"
#include "plan/pipeline_simulate.h"
#include "plan/pipeline_timeline.h"
#include "train/data_check.h"
#include "train/inspect_step.h"
#include "train/spec_options.h"
#include "train/trainer.h"
#include "util/error.h"
#include "util/exit_codes.h"

namespace trainctl::app {
namespace {

namespace fs = std::filesystem;

launch::LaunchOptions launch_options(const LaunchArgs& args, launch::WorkerMode mode) {
  launch::LaunchOptions opt;
  opt.mode = mode;
  opt.cluster = launch::resolve_cluster(args.cluster, launch::process_env());
  opt.token = args.token;
  opt.node_addr = args.node_addr;
  // The launcher picks the CPU kernel path once for its node's workers (they do not see
  // the launcher's TRAINCTL_* variables, only what it passes on).
  opt.worker_env.emplace_back(ops::cpu::kIsaVariable,
                              std::string(ops::cpu::isa_name(ops::cpu::isa_from_environment())));
  return opt;
}

// "27.3%".
std::string percent(double fraction) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f%%", 100.0 * fraction);
  return text;
}

// `plan`: every world rank's (dp, tp, pp) coordinates.
std::string plan_rank_map(const config::JobSpec& spec) {
  const Layout& layout = spec.parallel;
  std::string out = "rank map (world " + std::to_string(layout.world_size()) + " = dp " +
                    std::to_string(layout.dp) + " x tp " + std::to_string(layout.tp) + " x pp " +
                    std::to_string(layout.pp) +
                    "; rank = (pp_rank * dp + dp_rank) * tp + tp_rank):\n rank   dp   tp   pp\n";
  char line[64];
  for (int rank = 0; rank < layout.world_size(); ++rank) {
    const comm::Coord c = comm::coord_of(layout, rank);
    std::snprintf(line, sizeof line, "%5d %4d %4d %4d\n", rank, c.dp, c.tp, c.pp);
    out += line;
  }
  return out;
}

// "blocks 4-7 (4)", "block 3".
std::string block_range(const model::LayerRange& r) {
  if (r.size() == 1) return "block " + std::to_string(r.begin);
  return "blocks " + std::to_string(r.begin) + "-" + std::to_string(r.end - 1) + " (" +
         std::to_string(r.size()) + ")";
}

// `plan`: the transformer blocks of each pipeline stage (and of each of its chunks for the
// interleaved schedule), where the embedding and the LM head live, and each stage's forward
// cost in units of one block (what the partition balances).
std::string plan_layers(const config::JobSpec& spec) {
  const model::ModelConfig config = train::gpt_config(spec);
  const int pp = spec.parallel.pp;
  const int chunks = spec.parallel.virtual_stages;
  const double head = model::head_cost(config) / model::block_cost(config, spec.model.seq_len);
  auto cost_text = [](double cost) {
    char text[32];
    std::snprintf(text, sizeof text, "%.2f", cost);
    return std::string(text);
  };
  std::string out = "layers (" + std::to_string(config.n_layer) + " blocks, " + std::to_string(pp) +
                    (pp == 1 ? " stage" : " stages");
  if (chunks > 1) {
    out += " x " + std::to_string(chunks) + " chunks: chunk c of stage s is virtual stage c*" +
           std::to_string(pp) + " + s";
  }
  out += "):\n";
  std::vector<double> costs;
  for (int s = 0; s < pp; ++s) {
    const model::GptShardSpec shard =
        model::GptShardSpec::of(config, spec.model.seq_len, pp, s, chunks, 1, 0);
    double cost = shard.head ? head : 0.0;
    std::string parts = shard.embedding ? "embedding, " : "";
    for (size_t c = 0; c < shard.chunks.size(); ++c) {
      const model::LayerRange& r = shard.chunks[c];
      cost += r.size();
      if (c > 0) parts += ", ";
      if (chunks > 1) {
        parts += "chunk " + parallel::chunk_suffix(static_cast<int>(c), chunks) + " (virtual " +
                 std::to_string(static_cast<int>(c) * pp + s) + "): ";
      }
      parts += block_range(r);
    }
    if (shard.head) parts += ", LM head";
    out += " stage " + std::to_string(s) + ": " + parts + "; cost " + cost_text(cost) + "\n";
    costs.push_back(cost);
  }
  out += " (cost: forward work per token, one block = 1, the LM head = " + cost_text(head);
  if (pp > 1) {
    double total = 0;
    for (double c : costs) total += c;
    const double slowest = *std::max_element(costs.begin(), costs.end());
    out += "; the slowest stage, whose pace the pipeline runs at, does " +
           cost_text(slowest * pp / total) + "x the mean";
  }
  return out + ")\n";
}

// device: cuda runs one worker per visible GPU on each node (worker i on visible GPU i):
// refuses (exit 2) when the plugin, the CUDA libraries or enough GPUs are missing, and
// returns the GPUs' descriptions for the rank map. Empty for device: cpu.
std::vector<std::string> check_gpus(const config::JobSpec& spec, int nnodes) {
  if (spec.device != Device::cuda) return {};
  const device::CudaAvailability gpu = device::cuda_availability();
  if (!gpu.available) throw InputError(gpu.reason + "; or use device: cpu");
  const int per_node = launch::workers_per_node(spec.world_size(), nnodes);
  if (per_node > static_cast<int>(gpu.devices.size())) {
    throw InputError("device: cuda runs one worker per GPU: dp x tp x pp = " +
                     std::to_string(spec.world_size()) + " over " + std::to_string(nnodes) +
                     " node(s) needs " + std::to_string(per_node) + " GPUs per node, but " +
                     std::to_string(gpu.devices.size()) +
                     " are visible (CUDA_VISIBLE_DEVICES); use more nodes or a smaller layout");
  }
  return gpu.devices;
}

}  // namespace

int cmd_train(const LaunchArgs& args) {
  config::JobSpec spec = config::load_job_spec(args.job, args.overrides);
  train::check_trainable(spec);  // refuse what this build cannot train before spawning
  train::check_data(spec);       // and data the workers would refuse, before run_dir exists
  launch::LaunchOptions opt = launch_options(args, launch::WorkerMode::train);
  check_gpus(spec, opt.cluster.nnodes);
  check_memory_fits(spec, launch::workers_per_node(spec.world_size(), opt.cluster.nnodes));
  std::string resume = args.resume;
  if (resume != "auto" && resume != "none") {
    std::error_code ec;
    const fs::path path = fs::absolute(resume, ec);
    if (ec || !fs::is_directory(path)) {
      throw InputError("--resume " + resume +
                       ": no such checkpoint directory (use auto, none, or a path like "
                       "runs/<name>/checkpoints/step_00000100)");
    }
    resume = path.string();
    // Its metadata.json (checksum, every field) is checked here, before anything starts;
    // rank 0 checks the shards themselves before any rank reads them.
    try {
      checkpoint::resolve_checkpoint(path);
    } catch (const checkpoint::CheckpointCorrupt& e) {
      throw checkpoint::CheckpointCorrupt(std::string(e.what()) + " (--resume " + resume + ")");
    }
  }
  opt.worker_env.emplace_back("TRAINCTL_RESUME", resume);
  const int rc = launch::run_launcher(spec, opt);
  // checkpoint.export_hf: node 0 converts the final checkpoint once every worker is done.
  if (rc == kExitOk && spec.checkpoint.export_hf && opt.cluster.node_rank == 0) {
    return cmd_ckpt_export_hf(spec.run_dir, {}, {});
  }
  return rc;
}

int cmd_eval(const LaunchArgs& args, const fs::path& from) {
  config::JobSpec spec = config::load_job_spec(args.job, args.overrides);
  train::check_trainable(spec);
  train::check_data(spec);
  if (spec.training.eval_batches < 1) {
    throw InputError(args.job.string() + ": training.eval_batches is 0: nothing to evaluate");
  }
  // The workers' logs and resolved spec go to run_dir/eval/, leaving the training run's own.
  spec.run_dir = spec.run_dir / "eval";
  launch::LaunchOptions opt = launch_options(args, launch::WorkerMode::eval);
  check_gpus(spec, opt.cluster.nnodes);
  // The step directory, its metadata.json checked before anything starts (InputError or
  // CheckpointCorrupt naming the file).
  std::error_code ec;
  const fs::path dir = checkpoint::resolve_checkpoint(fs::absolute(from, ec));
  const model::ModelConfig saved = checkpoint::read_metadata(dir).model,
                           job = train::gpt_config(spec);
  const auto dims = [](const model::ModelConfig& c) {
    return std::string(model::to_string(c.family)) + ", vocab_size " +
           std::to_string(c.vocab_size) + ", seq_len " + std::to_string(c.max_seq_len) +
           ", n_layer " + std::to_string(c.n_layer) + ", n_head " + std::to_string(c.n_head) +
           ", d_model " + std::to_string(c.d_model);
  };
  if (saved != job) {
    throw InputError((dir / checkpoint::kMetadataFile).string() +
                     ": the checkpoint holds another model (" + dims(saved) + ") than " +
                     args.job.string() + " (" + dims(job) + ")");
  }
  opt.worker_env.emplace_back("TRAINCTL_RESUME", dir.string());
  return launch::run_launcher(spec, opt);
}

int cmd_selftest(const LaunchArgs& args, int repeat, bool quick) {
  if (repeat < 1)
    throw InputError("--repeat must be at least 1 (got " + std::to_string(repeat) + ")");
  config::JobSpec spec = config::load_job_spec(args.job, args.overrides);
  launch::LaunchOptions opt = launch_options(args, launch::WorkerMode::selftest);
  opt.worker_env.emplace_back("TRAINCTL_SELFTEST_REPEAT", std::to_string(repeat));
  if (quick) opt.worker_env.emplace_back("TRAINCTL_SELFTEST_QUICK", "1");
  return launch::run_launcher(spec, opt);
}

int cmd_validate(const fs::path& job, const std::vector<std::string>& overrides,
                 const launch::ClusterFlags& cluster_flags) {
  config::JobSpec spec = config::load_job_spec(job, overrides);
  const std::string data_line = train::check_data(spec);
  launch::ClusterPlacement cluster = launch::resolve_cluster(cluster_flags, launch::process_env());
  const Layout& layout = spec.parallel;
  std::vector<launch::RankPlacement> map = launch::rank_map(layout, cluster.nnodes);
  std::string out = config::summary(spec);
  if (!out.empty() && out.back() != '\n') out += '\n';
  if (!data_line.empty()) out += "data file:  " + data_line + "\n";
  out += "\nrank map (" + std::to_string(cluster.nnodes) + " node(s), " +
         std::to_string(launch::workers_per_node(layout.world_size(), cluster.nnodes)) +
         " worker(s) per node):\n";
  out += launch::format_rank_map(map);
  const std::vector<std::string> gpus = check_gpus(spec, cluster.nnodes);
  for (int local = 0; local < launch::workers_per_node(layout.world_size(), cluster.nnodes) &&
                      local < static_cast<int>(gpus.size());
       ++local) {
    out += "local rank " + std::to_string(local) + " -> GPU " + gpus[static_cast<size_t>(local)] +
           "\n";
  }
  if (spec.device == Device::cpu) out += cpu_kernels_text() + "\n";
  const int workers = launch::workers_per_node(layout.world_size(), cluster.nnodes);
  out += "\n" + memory_text(spec, workers);
  check_memory_fits(spec, workers);
  out += "\nok: " + job.string() + " is valid\n";
  try {
    train::check_trainable(spec);
  } catch (const InputError& e) {
    // Valid, but beyond what this build trains: say so now rather than at `train`.
    out += std::string("note: `trainctl train` cannot run it yet: ") + e.what() + "\n";
  }
  std::fputs(out.c_str(), stdout);
  return kExitOk;
}

int cmd_bench_comm(const BenchCommArgs& args) {
  if (args.world < 1) throw InputError("--world must be at least 1");
  if (args.min_bytes == 0 || args.min_bytes > args.max_bytes) {
    throw InputError("--min-bytes must be positive and at most --max-bytes");
  }
  if (args.iters < 1) throw InputError("--iters must be at least 1");

  launch::LaunchOptions opt;
  opt.mode = launch::WorkerMode::bench_comm;
  opt.cluster = launch::resolve_cluster(args.cluster, launch::process_env());
  opt.token = args.token;
  opt.node_addr = args.node_addr;
  if (opt.cluster.nnodes > 1 && !args.run_dir) {
    throw InputError("bench comm on " + std::to_string(opt.cluster.nnodes) +
                     " nodes needs --run-dir: a directory every node shares (the nodes check "
                     "that they see the same one before they start)");
  }
  fs::path run_dir;
  bool temporary = !args.run_dir.has_value();
  if (temporary) {
    std::string tmp = launch::process_env()("TMPDIR").value_or("");
    std::string pattern = (tmp.empty() ? std::string("/tmp") : tmp) + "/trainctl-bench-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw std::system_error(errno, std::generic_category(), "mkdtemp " + pattern);
    }
    run_dir = pattern;
  } else {
    run_dir = fs::absolute(*args.run_dir);
  }
  // A built-in job: just the layout (every rank in one data-parallel group).
  std::string yaml = "name: bench-comm\nrun_dir: '" + run_dir.string() +
                     "'\nparallel: {dp: " + std::to_string(args.world) +
                     "}\nruntime: {comm_selftest: false, allreduce_algo: " + args.allreduce_algo +
                     "}\n";
  config::JobSpec spec = config::parse_job_spec(yaml, "<bench comm>", fs::current_path());

  opt.worker_env = {{"TRAINCTL_BENCH_MIN_BYTES", std::to_string(args.min_bytes)},
                    {"TRAINCTL_BENCH_MAX_BYTES", std::to_string(args.max_bytes)},
                    {"TRAINCTL_BENCH_ITERS", std::to_string(args.iters)}};
  int code = launch::run_launcher(spec, opt);
  if (temporary) {
    if (code == kExitOk) {
      std::error_code ec;
      fs::remove_all(run_dir, ec);
    } else {
      spdlog::info("worker logs kept in {}", (run_dir / "logs").string());
    }
  }
  return code;
}

int cmd_inspect_step(const fs::path& job, const std::vector<std::string>& overrides,
                     const fs::path& out_dir, const std::optional<fs::path>& from) {
  config::JobSpec spec = config::load_job_spec(job, overrides);
  train::check_trainable(spec);
  train::inspect_step(spec, out_dir, from);
  std::printf("wrote the first step of '%s' to %s\n", spec.name.c_str(), out_dir.c_str());
  return kExitOk;
}

int cmd_plan(const fs::path& job, const std::vector<std::string>& overrides,
             std::optional<int> micro_batches, bool json, const fs::path& cluster_file) {
  config::JobSpec spec = config::load_job_spec(job, overrides);
  std::optional<plan::ClusterSpec> cluster;
  if (!cluster_file.empty()) cluster = plan::load_cluster_spec(cluster_file);
  if (micro_batches && *micro_batches < 1) {
    throw InputError("--micro-batches must be at least 1 (got " + std::to_string(*micro_batches) +
                     ")");
  }
  const int stages = spec.parallel.pp;
  const int m = micro_batches.value_or(spec.grad_accum());
  const parallel::ScheduleKind kind = parallel::parse_schedule_kind(spec.parallel.schedule);
  const bool interleaved = kind == parallel::ScheduleKind::interleaved;
  const int chunks = spec.parallel.virtual_stages;
  if (interleaved && stages < 2) {
    throw InputError(
        "parallel.schedule: interleaved needs parallel.pp >= 2 (with one stage there is no "
        "pipeline to interleave); use schedule: 1f1b");
  }
  if (interleaved && m % stages != 0) {
    throw InputError("--micro-batches " + std::to_string(m) +
                     ": the interleaved schedule runs micro-batches in groups of parallel.pp (" +
                     std::to_string(stages) + "); use a multiple of it");
  }
  // Time units: a backward costs about two forwards (gradients of inputs and of weights). The
  // simulator splits a stage's costs over its chunks: scale them so one chunk's forward is one
  // unit of the timeline.
  const double forward_cost = chunks, backward_cost = 2.0 * chunks;
  constexpr int kMaxCells = 64;  // lines of about 200 columns (250 with 2-digit micro-batches)
  const parallel::Simulation sim =
      parallel::simulate(kind, stages, m, forward_cost, backward_cost, chunks);

  const int workers = launch::workers_per_node(spec.world_size(), 1);
  if (json) {
    std::string peaks_json;
    for (const parallel::StageTimeline& stage : sim.stages) {
      peaks_json += (peaks_json.empty() ? "" : ", ") + std::to_string(stage.peak_activations);
    }
    std::string source;
    const double limit = memory_limit_bytes(spec, workers, &source);
    char bubble[64];
    std::snprintf(bubble, sizeof bubble, "%.6g", sim.stats.bubble_fraction);
    std::string out =
        std::string("{\"schedule\": \"") + parallel::to_string(kind) +
        "\", \"stages\": " + std::to_string(stages) + ", \"micro_batches\": " + std::to_string(m) +
        ", \"bubble\": " + bubble + ", \"peak_activations\": [" + peaks_json +
        "], \"activation_checkpointing\": \"" + spec.training.activation_checkpointing +
        "\", \"memory_limit_mb\": " +
        (limit > 0 ? std::to_string(limit / (1 << 20)) : std::string("null")) +
        ", \"memory_mb\": " + plan::memory_plan_json(spec, plan::plan_memory(spec)) +
        (cluster ? ", \"cost\": " +
                       plan::cost_json(plan::predict_step(plan::cost_inputs(spec), *cluster))
                 : std::string()) +
        "}\n";
    std::fputs(out.c_str(), stdout);
    return kExitOk;
  }
  std::string out = plan_rank_map(spec) + "\n" + plan_layers(spec) + "\n";
  std::string peaks;
  for (const parallel::StageTimeline& stage : sim.stages) {
    peaks += (peaks.empty() ? "" : ", ") + std::to_string(stage.peak_activations);
  }
  auto count = [](int n, const char* one, const char* many) {
    return std::to_string(n) + " " + (n == 1 ? one : many);
  };
  std::string shape = count(stages, "stage", "stages");
  if (interleaved) shape += " x " + std::to_string(chunks) + " chunks";
  const double theory = parallel::theoretical_bubble(kind, stages, m, chunks);
  out += std::string("schedule ") + parallel::to_string(kind) + ", " + shape + ", " +
         count(m, "micro-batch", "micro-batches") + ": bubble " +
         percent(sim.stats.bubble_fraction) + " (theory " +
         (interleaved ? "(p-1)/(V*m+p-1)" : "(p-1)/(m+p-1)") + " = " + percent(theory);
  if (interleaved) {
    out += "; 1f1b: " +
           percent(parallel::theoretical_bubble(parallel::ScheduleKind::one_f_one_b, stages, m));
  }
  out += ")\npeak activations per stage [" + peaks + "] " +
         (interleaved ? "(micro-batch chunks held, each 1/" + std::to_string(chunks) +
                            " of the stage's layers)\n"
                      : std::string("(micro-batches held)\n"));

  const parallel::TimelineText timeline = parallel::draw_timeline(sim, 1, kMaxCells);
  if (interleaved) {
    out +=
        "\ntimeline (one cell = one time unit: chunk forward F<mb><chunk> 1, backward "
        "B<mb><chunk>-- 2, idle ...; chunk a = the stage's first model chunk, b its second, "
        "...):\n";
  } else {
    out += "\ntimeline (one cell = one time unit: forward F<mb> 1, backward B<mb>-- 2, idle ..):\n";
  }
  out += timeline.text;
  if (timeline.cells_drawn < timeline.cells_total) {
    out += "(first " + std::to_string(timeline.cells_drawn) + " of " +
           std::to_string(timeline.cells_total) +
           " time units shown; --micro-batches draws a shorter schedule)\n";
  }
  out += "\n" + memory_text(spec, workers);
  if (cluster) {
    const plan::CostInputs inputs = plan::cost_inputs(spec);
    out += "\n" + plan::format_cost(inputs, *cluster, plan::predict_step(inputs, *cluster));
    const double peak = plan::peak_rank_bytes(plan::plan_memory(spec));
    char memory[160];
    std::snprintf(memory, sizeof memory,
                  "memory per GPU (the estimate above): %.3g GB of the device's %.3g GB\n",
                  peak / 1e9, cluster->memory_gb);
    out += memory;
  }
  std::fputs(out.c_str(), stdout);
  return kExitOk;
}

std::string version_text() {
  std::string build;
#ifdef NDEBUG
  build = "optimized";
#else
  build = "debug";
#endif
#if defined(__SANITIZE_ADDRESS__)
  build += ", AddressSanitizer";
#endif
#if defined(__clang__)
  build += ", clang " __clang_version__;
#elif defined(__GNUC__)
  build += ", gcc " __VERSION__;
#endif
  return std::string("trainctl ") + TRAINCTL_VERSION + "\nbuild: " + build +
         "; backends: cpu (OpenBLAS, Gloo)\n" + cpu_kernels_text();
}

std::string cpu_kernels_text() {
  namespace cpu = ops::cpu;
  const std::string supported = cpu::isa_list(cpu::supported_isas());
  try {
    const cpu::Isa isa = cpu::isa_from_environment();
    return "cpu kernels: " + std::string(cpu::isa_name(isa)) + " (this CPU: " + supported + "; " +
           cpu::kIsaVariable + " forces one)";
  } catch (const cpu::IsaError& e) {
    return std::string("cpu kernels: error: ") + e.what();
  }
}

void check_cpu_kernels() {
  try {
    ops::cpu::isa_from_environment();
  } catch (const ops::cpu::IsaError& e) {
    throw InputError(e.what());
  }
}

}  // namespace trainctl::app
