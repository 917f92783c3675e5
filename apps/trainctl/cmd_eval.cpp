// `trainctl eval RUN_DIR|CKPT` (or `eval JOB.yaml --from CKPT`): a checkpoint's validation
// loss and bits per byte on the job's data, on the job's layout (launcher and workers in
// eval mode).
#include <algorithm>
#include <system_error>

#include "checkpoint/commit.h"
#include "checkpoint_model.h"
#include "cli.h"
#include "config/load.h"
#include "launch_support.h"
#include "train/data_check.h"
#include "train/trainer.h"
#include "util/error.h"

namespace trainctl::app {
namespace {

namespace fs = std::filesystem;

constexpr const char* kResolvedSpec = "config.resolved.yaml";

// The run directory whose config.resolved.yaml describes `source`: the run directory itself,
// its checkpoints/ or one of its step directories.
fs::path run_dir_of(const fs::path& source) {
  fs::path dir = fs::absolute(source).lexically_normal();
  if (!dir.has_filename()) dir = dir.parent_path();  // "runs/job/" -> "runs/job"
  for (int up = 0; up < 3 && !dir.empty(); ++up, dir = dir.parent_path()) {
    std::error_code ec;
    if (fs::is_regular_file(dir / kResolvedSpec, ec)) return dir;
    if (dir == dir.root_path()) break;
  }
  throw InputError(source.string() + ": no " + kResolvedSpec +
                   " here or in the run directory above it; give a run directory (runs/<name>), "
                   "a checkpoint inside one, or the job spec: trainctl eval JOB.yaml --from CKPT");
}

}  // namespace

EvalSource resolve_eval_source(const fs::path& source, const std::string& from) {
  std::error_code ec;
  if (!fs::exists(source, ec)) {
    throw InputError("eval " + source.string() +
                     ": no such file or directory; give a run directory (runs/<name>), a "
                     "checkpoint inside one, or a job spec with --from CKPT");
  }
  if (!fs::is_directory(source, ec)) {
    // A job spec (or a path that is nothing: load_job_spec says so).
    if (from.empty()) {
      throw InputError("eval " + source.string() +
                       ": --from CKPT is required with a job spec (a checkpoint, checkpoints/ or "
                       "run directory); or give the run directory alone: trainctl eval "
                       "runs/<name>");
    }
    return {source, from, std::nullopt};
  }
  const fs::path run_dir = run_dir_of(source);
  return {run_dir / kResolvedSpec, from.empty() ? source : fs::path(from), run_dir};
}

int cmd_eval(const LaunchArgs& args, const EvalSource& source) {
  config::JobSpec spec = config::load_job_spec(source.spec, args.overrides);
  // The run directory as found (it may have moved since config.resolved.yaml was written),
  // unless --set run_dir=... says otherwise.
  const bool run_dir_set =
      std::any_of(args.overrides.begin(), args.overrides.end(),
                  [](const std::string& o) { return o.rfind("run_dir", 0) == 0; });
  if (source.run_dir && !run_dir_set) spec.run_dir = *source.run_dir;
  train::check_trainable(spec);
  train::check_data(spec);
  if (spec.training.eval_batches < 1) {
    throw InputError(source.spec.string() + ": training.eval_batches is 0: nothing to evaluate");
  }
  // The workers' logs and resolved spec go to run_dir/eval/, leaving the training run's own.
  spec.run_dir = spec.run_dir / "eval";
  launch::LaunchOptions opt = launch_options(args, launch::WorkerMode::eval);
  check_gpus(spec, opt.cluster.nnodes);
  // The step directory, its metadata.json checked before anything starts (InputError or
  // CheckpointCorrupt naming the file).
  std::error_code ec;
  const fs::path dir = checkpoint::resolve_checkpoint(fs::absolute(source.checkpoint, ec));
  check_checkpoint_model(dir, spec, source.spec.string(),
                         "Evaluate it with the job spec that trained it.");
  opt.worker_env.emplace_back("TRAINCTL_RESUME", dir.string());
  return launch::run_launcher(spec, opt);
}

void add_eval_command(CLI::App& app, Dispatches& out) {
  struct Options {
    std::string source, from;
    std::vector<std::string> overrides;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "eval", "Validation loss and bits per byte of a checkpoint on the job's data");
  cmd->add_option("source", o->source,
                  "A run directory or a checkpoint in one (its config.resolved.yaml is the "
                  "job), or a job spec (YAML) with --from")
      ->required();
  cmd->add_option("--from", o->from,
                  "A checkpoint: a step_N directory, a checkpoints/ or a run directory (its "
                  "newest valid checkpoint); any dp/tp/pp/ZeRO layout. Default: SOURCE when it "
                  "is a directory");
  cmd->add_option("--set", o->overrides,
                  "Override a spec value: key.path=value (repeatable), e.g. --set parallel.tp=2")
      ->allow_extra_args(false);
  cmd->footer(
      "Example:\n  trainctl eval runs/job                       # newest checkpoint of the run\n"
      "  trainctl eval runs/job/checkpoints/step_00000200 --set parallel.tp=2\n"
      "  trainctl eval job.yaml --from runs/job         # the job spec instead of the run's\n\n"
      "Launches the job's layout on this node (workers in eval mode; logs in run_dir/eval/),\n"
      "loads the checkpoint "
      "into it and evaluates training.eval_batches validation batches: the same batches a\n"
      "training run evaluates, so the loss equals the val_loss metrics.jsonl logged at that\n"
      "step. Prints\n"
      "  eval step N: val_loss L, bits per byte B (T tokens, Y bytes)\n"
      "with B = L * T / (Y * ln 2): Y = T for byte-level data; for `data prepare` data, the\n"
      "bytes of the target tokens' text under its tokenizer. Exit code 2 for a missing or\n"
      "damaged checkpoint or one of another model.");
  out.push_back({cmd, [o] {
                   LaunchArgs args;
                   const EvalSource source = resolve_eval_source(o->source, o->from);
                   args.job = source.spec;
                   args.overrides = o->overrides;
                   return cmd_eval(args, source);
                 }});
}

}  // namespace trainctl::app
