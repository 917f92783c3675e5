// `trainctl train JOB`: validate the spec, then launch this node's workers and supervise them.
#include <system_error>

#include "checkpoint/commit.h"
#include "checkpoint/errors.h"
#include "checkpoint_model.h"
#include "ckpt_commands.h"
#include "cli.h"
#include "config/load.h"
#include "launch/rank_map.h"
#include "launch_support.h"
#include "memory_check.h"
#include "mlflow_artifacts.h"
#include "train/data_check.h"
#include "train/init_from_check.h"
#include "train/trainer.h"
#include "util/error.h"
#include "util/exit_codes.h"

namespace trainctl::app {
namespace {

namespace fs = std::filesystem;

// --resume auto|none stay words; a checkpoint path becomes absolute and its metadata.json
// (checksum, every field) is checked here, before anything starts; rank 0 checks the shards
// themselves before any rank reads them.
std::string resolve_resume(const std::string& resume) {
  if (resume == "auto" || resume == "none") return resume;
  std::error_code ec;
  const fs::path path = fs::absolute(resume, ec);
  if (ec || !fs::is_directory(path)) {
    throw InputError("--resume " + resume +
                     ": no such checkpoint directory (use auto, none, or a path like "
                     "runs/<name>/checkpoints/step_00000100)");
  }
  try {
    checkpoint::resolve_checkpoint(path);
  } catch (const checkpoint::CheckpointCorrupt& e) {
    throw checkpoint::CheckpointCorrupt(std::string(e.what()) + " (--resume " + path.string() +
                                        ")");
  }
  return path.string();
}

// "3:4" -> the override of logging.profile_steps.
std::string profile_override(const std::string& profile) {
  const size_t colon = profile.find(':');
  return "logging.profile_steps=[" + profile.substr(0, colon) + ", " + profile.substr(colon + 1) +
         "]";
}

struct TrainOptions {
  JobOptions job;
  ClusterOptions cluster;
  std::string resume = "auto", profile;
  bool overwrite = false;
};

}  // namespace

int cmd_train(const LaunchArgs& args) {
  config::JobSpec spec = config::load_job_spec(args.job, args.overrides);
  train::check_trainable(spec);  // refuse what this build cannot train before spawning
  train::check_data(spec);       // and data the workers would refuse, before run_dir exists
  train::check_init_from(spec);  // and a model.init_from folder they could not read
  launch::LaunchOptions opt = launch_options(args, launch::WorkerMode::train);
  check_gpus(spec, opt.cluster.nnodes);
  check_memory_fits(spec, launch::workers_per_node(spec.world_size(), opt.cluster.nnodes));
  const std::string resume = resolve_resume(args.resume);
  if (args.overwrite && resume != "none") {
    throw InputError(
        "--overwrite moves an earlier run aside to start over: use it with "
        "--resume none (this command resumes with --resume " +
        args.resume + ")");
  }
  opt.fresh_start = resume == "none";
  opt.overwrite_run = args.overwrite;
  // The checkpoint's model, before any worker starts (they would refuse it only after their
  // start-up and self-test).
  if (const std::optional<fs::path> dir = resume_candidate(spec, resume)) {
    check_checkpoint_model(*dir, spec, args.job.string(),
                           resume == "auto"
                               ? "It is run_dir's newest checkpoint: set another run_dir for "
                                 "this model, or start over with --resume none --overwrite "
                                 "(which moves the old run aside)."
                               : "Resume with the job spec that wrote it, or start over with "
                                 "--resume none.");
    check_checkpoint_optimizer(*dir, spec);
  }
  opt.worker_env.emplace_back("TRAINCTL_RESUME", resume);
  int rc = launch::run_launcher(spec, opt);
  if (opt.cluster.node_rank != 0) return rc;
  // checkpoint.export_hf: node 0 converts the final checkpoint once every worker is done.
  const bool export_hf = rc == kExitOk && spec.checkpoint.export_hf;
  // run_dir/hf is the run's own export: a resumed run replaces the earlier one's.
  if (export_hf) rc = cmd_ckpt_export_hf(spec.run_dir, {}, {}, /*force=*/true);
  if (spec.logging.mlflow.enabled()) log_mlflow_artifacts(spec, export_hf && rc == kExitOk);
  return rc;
}

void add_train_command(CLI::App& app, Dispatches& out) {
  auto o = std::make_shared<TrainOptions>();
  CLI::App* cmd =
      app.add_subcommand("train", "Train a model: launch the job's workers on this node");
  o->job.add_to(cmd);
  cmd->add_option("--resume", o->resume,
                  "Where training starts: auto (the newest complete checkpoint in "
                  "run_dir/checkpoints, else from scratch), none (from scratch), or a "
                  "checkpoint directory (any dp/tp/pp layout)")
      ->default_val("auto");
  cmd->add_flag("--overwrite", o->overwrite,
                "With --resume none on a run_dir that holds an earlier run: move that run "
                "(checkpoints, metrics, logs, TensorBoard) to run_dir/previous-<UTC time>/ and "
                "start over (without it, such a start is refused: one history per run_dir)");
  cmd->add_option("--profile", o->profile,
                  "Record a timeline of steps A..B on every rank (as logging.profile_steps: "
                  "[A, B]), merged into run_dir/trace.json for Perfetto UI / chrome://tracing")
      ->check([](const std::string& v) {
        const size_t colon = v.find(':');
        const bool digits = colon != std::string::npos && colon > 0 && colon + 1 < v.size() &&
                            v.find_first_not_of("0123456789") == colon &&
                            v.find_first_not_of("0123456789", colon + 1) == std::string::npos;
        return digits ? std::string() : "expected A:B, two step numbers (e.g. 3:4); got " + v;
      });
  o->cluster.add_to(cmd, true);
  cmd->footer(
      std::string("Example:\n  trainctl train job.yaml --set training.steps=50\n"
                  "  trainctl train job.yaml --resume runs/job/checkpoints/step_00000100\n"
                  "  trainctl train job.yaml --resume none --overwrite   # start over\n"
                  "  trainctl train job.yaml --profile 3:4   # timeline -> run_dir/trace.json\n"
                  "  srun --ntasks-per-node=1 trainctl train job.yaml   # Slurm, N nodes\n\n") +
      kClusterHelp + "\n\n" + kExitCodesHelp);
  out.push_back({cmd, [o] {
                   LaunchArgs args;
                   args.job = o->job.job;
                   args.overrides = o->job.overrides;
                   if (!o->profile.empty()) args.overrides.push_back(profile_override(o->profile));
                   args.resume = o->resume;
                   args.overwrite = o->overwrite;
                   o->cluster.fill(args);
                   return cmd_train(args);
                 }});
}

}  // namespace trainctl::app
