// `trainctl eval JOB --from CKPT`: a checkpoint's validation loss and bits per byte on the
// job's data, on the job's layout (launcher and workers in eval mode).
#include <system_error>

#include "checkpoint/commit.h"
#include "checkpoint/metadata.h"
#include "cli.h"
#include "config/load.h"
#include "launch_support.h"
#include "train/data_check.h"
#include "train/spec_options.h"
#include "train/trainer.h"
#include "util/error.h"

namespace trainctl::app {
namespace {

namespace fs = std::filesystem;

std::string model_dims(const model::ModelConfig& c) {
  return std::string(model::to_string(c.family)) + ", vocab_size " + std::to_string(c.vocab_size) +
         ", seq_len " + std::to_string(c.max_seq_len) + ", n_layer " + std::to_string(c.n_layer) +
         ", n_head " + std::to_string(c.n_head) + ", d_model " + std::to_string(c.d_model);
}

}  // namespace

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
  if (saved != job) {
    throw InputError((dir / checkpoint::kMetadataFile).string() +
                     ": the checkpoint holds another model (" + model_dims(saved) + ") than " +
                     args.job.string() + " (" + model_dims(job) + ")");
  }
  opt.worker_env.emplace_back("TRAINCTL_RESUME", dir.string());
  return launch::run_launcher(spec, opt);
}

void add_eval_command(CLI::App& app, Dispatches& out) {
  struct Options {
    JobOptions job;
    std::string from;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "eval", "Validation loss and bits per byte of a checkpoint on the job's data");
  o->job.add_to(cmd);
  cmd->add_option("--from", o->from,
                  "A checkpoint: a step_N directory, a checkpoints/ or a run directory (its "
                  "newest valid checkpoint); any dp/tp/pp/ZeRO layout")
      ->required();
  cmd->footer(
      "Example:\n  trainctl eval job.yaml --from runs/job\n"
      "  trainctl eval job.yaml --from runs/job/checkpoints/step_00000200 --set parallel.tp=2\n\n"
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
                   args.job = o->job.job;
                   args.overrides = o->job.overrides;
                   return cmd_eval(args, o->from);
                 }});
}

}  // namespace trainctl::app
