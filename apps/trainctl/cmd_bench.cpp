// `trainctl bench comm`: collective bandwidth between workers (nccl-tests style).
#include <spdlog/spdlog.h>
#include <stdlib.h>

#include <cerrno>
#include <system_error>

#include "cli.h"
#include "comm/gloo/gloo_options.h"
#include "config/load.h"
#include "launch/launcher.h"
#include "util/error.h"
#include "util/exit_codes.h"

namespace trainctl::app {
namespace {

namespace fs = std::filesystem;

// A fresh directory under $TMPDIR for the workers' logs.
fs::path temporary_run_dir() {
  std::string tmp = launch::process_env()("TMPDIR").value_or("");
  std::string pattern = (tmp.empty() ? std::string("/tmp") : tmp) + "/trainctl-bench-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw std::system_error(errno, std::generic_category(), "mkdtemp " + pattern);
  }
  return pattern;
}

}  // namespace

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
  const bool temporary = !args.run_dir.has_value();
  const fs::path run_dir = temporary ? temporary_run_dir() : fs::absolute(*args.run_dir);
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

void add_bench_command(CLI::App& app, Dispatches& out) {
  struct Options {
    BenchCommArgs args;
    std::string device = "cpu", run_dir;
    ClusterOptions cluster;
  };
  auto o = std::make_shared<Options>();
  CLI::App* bench = app.add_subcommand("bench", "Benchmarks");
  bench->require_subcommand(1);
  CLI::App* cmd = bench->add_subcommand(
      "comm", "Collective bandwidth (nccl-tests style) between workers on this node");
  cmd->add_option("--world", o->args.world, "Number of workers")
      ->capture_default_str()
      ->check(at_least(1));
  cmd->add_option("--device", o->device, "Device backend")
      ->capture_default_str()
      ->check(CLI::IsMember({"cpu"}));
  cmd->add_option("--min-bytes", o->args.min_bytes, "Smallest message (e.g. 4K)")
      ->capture_default_str()
      ->transform(CLI::AsSizeValue(false));
  cmd->add_option("--max-bytes", o->args.max_bytes, "Largest message (e.g. 64M)")
      ->capture_default_str()
      ->transform(CLI::AsSizeValue(false));
  cmd->add_option("--iters", o->args.iters, "Timed iterations per size")
      ->capture_default_str()
      ->check(at_least(1));
  cmd->add_option("--allreduce-algo", o->args.allreduce_algo,
                  "Allreduce algorithm, as runtime.allreduce_algo in a job spec: auto "
                  "(shared memory between workers on one host), or a TCP one to compare")
      ->capture_default_str()
      ->check([](const std::string& name) {
        try {
          comm::parse_allreduce_algo(name);  // the one list of algorithm names
          return std::string();
        } catch (const std::invalid_argument& e) {
          return std::string(e.what());
        }
      });
  cmd->add_option("--run-dir", o->run_dir,
                  "Keep the run directory (worker logs) here; default: a temporary "
                  "directory, removed after a successful run (several nodes: required, "
                  "on a file system every node shares)");
  o->cluster.add_to(cmd, true);
  cmd->footer(
      "Example:\n  trainctl bench comm --world 4 --min-bytes 1K --max-bytes 16M\n"
      "  trainctl bench comm --allreduce-algo ring     # the same over TCP only\n\n"
      "Columns: message size, time per call (slowest rank's median), algorithm bandwidth\n"
      "(size / time), bus bandwidth (comparable across world sizes, as nccl-tests) and the\n"
      "algorithm each size used: shm (shared memory, workers on one host), direct or ring\n"
      "(over TCP), hierarchical (shared memory within hosts, TCP across them).\n\n"
      "Several nodes: --world workers in all, one launcher per node with the same --nnodes,\n"
      "--master-addr, --master-port, --token and a shared --run-dir (or under Slurm).");
  out.push_back({cmd, [o] {
                   BenchCommArgs args = o->args;
                   if (!o->run_dir.empty()) args.run_dir = o->run_dir;
                   LaunchArgs cluster_args;
                   o->cluster.fill(cluster_args);
                   args.cluster = cluster_args.cluster;
                   args.token = cluster_args.token;
                   args.node_addr = cluster_args.node_addr;
                   return cmd_bench_comm(args);
                 }});
}

}  // namespace trainctl::app
