// `trainctl selftest JOB`: launch the job's layout and check every group's collectives.
#include "cli.h"
#include "config/load.h"
#include "launch_support.h"
#include "util/error.h"

namespace trainctl::app {

int cmd_selftest(const LaunchArgs& args, int repeat, bool quick) {
  if (repeat < 1)
    throw InputError("--repeat must be at least 1 (got " + std::to_string(repeat) + ")");
  config::JobSpec spec = config::load_job_spec(args.job, args.overrides);
  launch::LaunchOptions opt = launch_options(args, launch::WorkerMode::selftest);
  opt.worker_env.emplace_back("TRAINCTL_SELFTEST_REPEAT", std::to_string(repeat));
  if (quick) opt.worker_env.emplace_back("TRAINCTL_SELFTEST_QUICK", "1");
  return launch::run_launcher(spec, opt);
}

void add_selftest_command(CLI::App& app, Dispatches& out) {
  struct Options {
    JobOptions job;
    ClusterOptions cluster;
    int repeat = 1;
    bool quick = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "selftest", "Launch the job's layout and verify every group's collectives (no training)");
  o->job.add_to(cmd);
  o->cluster.add_to(cmd, true);
  cmd->add_option("--repeat", o->repeat, "Run the self-test this many times (soak test)")
      ->check(at_least(1));
  cmd->add_flag("--quick", o->quick,
                "Small messages only (up to 4096 floats): checks every group's wiring in a "
                "fraction of the time, not the large-message paths");
  cmd->footer(std::string("Checks a new cluster or node before a long job: every rank runs\n"
                          "allreduce, reduce-scatter, allgather, broadcast, send/recv and\n"
                          "barrier in the world, DP, TP and PP groups and compares exactly.\n"
                          "Example:\n  trainctl selftest job.yaml --set parallel.dp=4\n\n") +
              kClusterHelp + "\n\n" + kExitCodesHelp);
  out.push_back({cmd, [o] {
                   LaunchArgs args;
                   args.job = o->job.job;
                   args.overrides = o->job.overrides;
                   o->cluster.fill(args);
                   return cmd_selftest(args, o->repeat, o->quick);
                 }});
}

}  // namespace trainctl::app
