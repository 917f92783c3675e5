#pragma once
// The handlers of the subcommands (each cmd_<name>.cpp parses its options into these).
// Each returns the process exit code (util/exit_codes.h) and lets InputError and
// RendezvousError propagate: main.cpp maps them to exit codes 2 and 5.
#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "launch/cluster_env.h"

namespace trainctl::app {

// Flags shared by the commands that launch a job.
struct LaunchArgs {
  std::filesystem::path job;
  std::vector<std::string> overrides;  // --set key=value
  launch::ClusterFlags cluster;
  std::optional<std::string> token;
  std::optional<std::string> node_addr;
  std::string resume = "auto";  // train only: auto | none | a checkpoint directory
  bool overwrite = false;       // train only: --overwrite (with --resume none)
};

int cmd_train(const LaunchArgs& args);
// `quick`: small messages only (checks the wiring of every group in a fraction of the time).
// What `trainctl eval SOURCE [--from CKPT]` evaluates: the job spec (a run's
// config.resolved.yaml when SOURCE is a run directory or a checkpoint in one; else SOURCE,
// a job spec, which needs --from) and the checkpoint (--from, else SOURCE).
struct EvalSource {
  std::filesystem::path spec;
  std::filesystem::path checkpoint;
  std::optional<std::filesystem::path> run_dir;  // the run directory found, if any
};
// InputError when SOURCE is a directory without a config.resolved.yaml in or above it, or a
// job spec without --from.
EvalSource resolve_eval_source(const std::filesystem::path& source, const std::string& from);
// The checkpoint's validation loss and bits per byte on the job's data, on the job's layout
// (launcher and workers, WorkerMode::eval).
int cmd_eval(const LaunchArgs& args, const EvalSource& source);
int cmd_selftest(const LaunchArgs& args, int repeat, bool quick);
int cmd_validate(const std::filesystem::path& job, const std::vector<std::string>& overrides,
                 const launch::ClusterFlags& cluster);

struct BenchCommArgs {
  int world = 2;
  size_t min_bytes = 4 * 1024;
  size_t max_bytes = 64 * 1024 * 1024;
  int iters = 5;
  std::string allreduce_algo = "auto";           // runtime.allreduce_algo of the built-in job
  std::optional<std::filesystem::path> run_dir;  // unset: a temporary directory
  // Several nodes (--nnodes ... or Slurm): --world workers in all, one launcher per node.
  launch::ClusterFlags cluster;
  std::optional<std::string> token;
  std::optional<std::string> node_addr;
};
int cmd_bench_comm(const BenchCommArgs& args);

// `inspect step`: the job's first step on one worker, written to out_dir for cross-checks.
int cmd_inspect_step(const std::filesystem::path& job, const std::vector<std::string>& overrides,
                     const std::filesystem::path& out_dir,
                     const std::optional<std::filesystem::path>& from);

// `plan`: the job's pipeline schedule (parallel.pp stages, parallel.schedule), simulated with
// forward = 1 and backward = 2 time units: a summary line (bubble, peak activations per stage)
// and a timeline per stage, then each rank's memory estimate (plan/memory_plan.h).
// `micro_batches` overrides the spec's gradient-accumulation steps for the drawing. `json`:
// one JSON object instead (bubble, peak activations, memory_mb per rank). `cluster_file`
// (may be empty): also predict the step on that cluster (plan/cost_model.h).
int cmd_plan(const std::filesystem::path& job, const std::vector<std::string>& overrides,
             std::optional<int> micro_batches, bool json,
             const std::filesystem::path& cluster_file = {});

// "trainctl <version>" and a line about the build.
std::string version_text();

// "cpu kernels: avx2 (this CPU: generic, avx2; TRAINCTL_CPU_ISA forces one)", or the error
// a bad TRAINCTL_CPU_ISA gives.
std::string cpu_kernels_text();
// Throws InputError (exit 2) when TRAINCTL_CPU_ISA names a path this CPU cannot run.
void check_cpu_kernels();

}  // namespace trainctl::app
