#include "commands.h"

#include <spdlog/spdlog.h>
#include <stdlib.h>

#include <cstdio>
#include <system_error>

#include "config/load.h"
#include "launch/launcher.h"
#include "launch/rank_map.h"
#include "parallel/pipeline_schedule.h"
#include "parallel/pipeline_simulate.h"
#include "parallel/pipeline_timeline.h"
#include "train/inspect_step.h"
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
  return opt;
}

}  // namespace

int cmd_train(const LaunchArgs& args) {
  config::JobSpec spec = config::load_job_spec(args.job, args.overrides);
  train::check_trainable(spec);  // refuse what this build cannot train before spawning
  return launch::run_launcher(spec, launch_options(args, launch::WorkerMode::train));
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
  launch::ClusterPlacement cluster = launch::resolve_cluster(cluster_flags, launch::process_env());
  comm::Layout layout{spec.parallel.dp, spec.parallel.tp, spec.parallel.pp};
  std::vector<launch::RankPlacement> map = launch::rank_map(layout, cluster.nnodes);
  std::string out = config::summary(spec);
  if (!out.empty() && out.back() != '\n') out += '\n';
  out += "\nrank map (" + std::to_string(cluster.nnodes) + " node(s), " +
         std::to_string(launch::workers_per_node(layout.world_size(), cluster.nnodes)) +
         " worker(s) per node):\n";
  out += launch::format_rank_map(map);
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

  fs::path run_dir;
  bool temporary = !args.run_dir.has_value();
  if (temporary) {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/trainctl-bench-XXXXXX";
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
                     "}\nruntime: {comm_selftest: false}\n";
  config::JobSpec spec = config::parse_job_spec(yaml, "<bench comm>", fs::current_path());

  launch::LaunchOptions opt;
  opt.mode = launch::WorkerMode::bench_comm;
  opt.cluster = launch::resolve_cluster(
      {.nnodes = 1, .node_rank = 0, .master_addr = "127.0.0.1", .master_port = 0},
      launch::process_env());
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
                     const fs::path& out_dir) {
  config::JobSpec spec = config::load_job_spec(job, overrides);
  train::check_trainable(spec);
  train::inspect_step(spec, out_dir);
  std::printf("wrote the first step of '%s' to %s\n", spec.name.c_str(), out_dir.c_str());
  return kExitOk;
}

int cmd_plan(const fs::path& job, const std::vector<std::string>& overrides,
             std::optional<int> micro_batches) {
  config::JobSpec spec = config::load_job_spec(job, overrides);
  if (micro_batches && *micro_batches < 1) {
    throw InputError("--micro-batches must be at least 1 (got " + std::to_string(*micro_batches) +
                     ")");
  }
  const int stages = spec.parallel.pp;
  const int m = micro_batches.value_or(spec.grad_accum());
  const parallel::ScheduleKind kind = parallel::parse_schedule_kind(spec.parallel.schedule);
  // Time units: a backward costs about two forwards (gradients of inputs and of weights).
  constexpr double kForwardCost = 1, kBackwardCost = 2;
  constexpr int kMaxCells = 64;  // lines of about 200 columns (250 with 2-digit micro-batches)
  const parallel::Simulation sim = parallel::simulate(kind, stages, m, kForwardCost, kBackwardCost);

  std::string peaks;
  for (const parallel::StageTimeline& stage : sim.stages) {
    peaks += (peaks.empty() ? "" : ", ") + std::to_string(stage.peak_activations);
  }
  char bubble[32];
  std::snprintf(bubble, sizeof bubble, "%.1f%%", 100.0 * sim.stats.bubble_fraction);
  auto count = [](int n, const char* one, const char* many) {
    return std::to_string(n) + " " + (n == 1 ? one : many);
  };
  std::string out = std::string("schedule ") + parallel::to_string(kind) + ", " +
                    count(stages, "stage", "stages") + ", " +
                    count(m, "micro-batch", "micro-batches") + ": bubble " + bubble +
                    ", peak activations per stage [" + peaks + "] (micro-batches held)\n";
  const parallel::TimelineText timeline = parallel::draw_timeline(sim, 1, kMaxCells);
  out += "\ntimeline (one cell = one time unit: forward F<mb> 1, backward B<mb>-- 2, idle ..):\n";
  out += timeline.text;
  if (timeline.cells_drawn < timeline.cells_total) {
    out += "(first " + std::to_string(timeline.cells_drawn) + " of " +
           std::to_string(timeline.cells_total) +
           " time units shown; --micro-batches draws a shorter schedule)\n";
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
         "; backends: cpu (OpenBLAS, Gloo)";
}

}  // namespace trainctl::app
