// `trainctl validate JOB`: check a spec and show the resolved setup, rank map and memory
// estimate; starts nothing.
#include <cstdio>

#include "cli.h"
#include "config/load.h"
#include "launch/rank_map.h"
#include "launch_support.h"
#include "memory_check.h"
#include "stage_layers_text.h"
#include "train/data_check.h"
#include "train/init_from_check.h"
#include "train/trainer.h"
#include "util/error.h"
#include "util/exit_codes.h"

namespace trainctl::app {

int cmd_validate(const std::filesystem::path& job, const std::vector<std::string>& overrides,
                 const launch::ClusterFlags& cluster_flags) {
  config::JobSpec spec = config::load_job_spec(job, overrides);
  const std::string data_line = train::check_data(spec);
  const std::string init_line = train::check_init_from(spec);
  launch::ClusterPlacement cluster = launch::resolve_cluster(cluster_flags, launch::process_env());
  const Layout& layout = spec.parallel;
  const int workers = launch::workers_per_node(layout.world_size(), cluster.nnodes);
  std::string out = config::summary(spec);
  if (!out.empty() && out.back() != '\n') out += '\n';
  if (!data_line.empty()) out += "data file:  " + data_line + "\n";
  if (!init_line.empty()) out += "init_from:  " + init_line + "\n";
  out += "\nrank map (" + std::to_string(cluster.nnodes) + " node(s), " + std::to_string(workers) +
         " worker(s) per node):\n";
  out += launch::format_rank_map(launch::rank_map(layout, cluster.nnodes));
  const std::vector<std::string> gpus = check_gpus(spec, cluster.nnodes);
  for (int local = 0; local < workers && local < static_cast<int>(gpus.size()); ++local) {
    out += "local rank " + std::to_string(local) + " -> GPU " + gpus[static_cast<size_t>(local)] +
           "\n";
  }
  if (spec.device == Device::cpu) out += cpu_kernels_text() + "\n";
  if (layout.pp > 1) out += "\n" + stage_layers_text(spec);
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

namespace {

// `validate --show-resolved`: the spec as the workers get it (includes merged, variables
// expanded, defaults filled in, paths absolute), as YAML on stdout; checks as `validate`.
int show_resolved(const std::filesystem::path& job, const std::vector<std::string>& overrides) {
  const config::JobSpec spec = config::load_job_spec(job, overrides);
  train::check_data(spec);
  train::check_init_from(spec);
  std::fputs(config::to_yaml(spec).c_str(), stdout);
  return kExitOk;
}

}  // namespace

void add_validate_command(CLI::App& app, Dispatches& out) {
  struct Options {
    JobOptions job;
    ClusterOptions cluster;
    bool show_resolved = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "validate", "Check a job spec and show the resolved setup and rank map (starts nothing)");
  o->job.add_to(cmd);
  o->cluster.add_to(cmd, false);
  cmd->add_flag("--show-resolved", o->show_resolved,
                "Print the resolved spec as YAML instead: includes merged, variables expanded, "
                "defaults filled in, paths absolute (what the run writes to "
                "run_dir/config.resolved.yaml)");
  cmd->footer(
      "Example:\n  trainctl validate job.yaml --set parallel.tp=2 --nnodes 2\n"
      "  trainctl validate job.yaml --show-resolved > resolved.yaml\n\n"
      "Prints the model and batch arithmetic, a memory estimate and which node, local slot\n"
      "and (dp, tp, pp) coordinates each rank gets. Exit code 2 when the spec is invalid.");
  out.push_back({cmd, [o] {
                   if (o->show_resolved) return show_resolved(o->job.job, o->job.overrides);
                   return cmd_validate(o->job.job, o->job.overrides, o->cluster.flags());
                 }});
}

}  // namespace trainctl::app
