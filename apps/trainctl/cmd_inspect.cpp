// `trainctl inspect step JOB --out DIR`: the job's first step on one worker, every input
// and result written out for cross-checks (tests/torch/check_against_torch.py).
#include <cstdio>

#include "cli.h"
#include "config/load.h"
#include "train/inspect_step.h"
#include "train/trainer.h"
#include "util/exit_codes.h"

namespace trainctl::app {

int cmd_inspect_step(const std::filesystem::path& job, const std::vector<std::string>& overrides,
                     const std::filesystem::path& out_dir,
                     const std::optional<std::filesystem::path>& from) {
  config::JobSpec spec = config::load_job_spec(job, overrides);
  train::check_trainable(spec);
  train::inspect_step(spec, out_dir, from);
  std::printf("wrote the first step of '%s' to %s\n", spec.name.c_str(), out_dir.c_str());
  return kExitOk;
}

void add_inspect_command(CLI::App& app, Dispatches& out) {
  struct Options {
    JobOptions job;
    std::string out, from;
  };
  auto o = std::make_shared<Options>();
  CLI::App* inspect = app.add_subcommand("inspect", "Look inside a job's computation");
  inspect->require_subcommand(1);
  CLI::App* cmd = inspect->add_subcommand(
      "step",
      "Run the job's first training step on one worker and write all of its inputs "
      "and results");
  o->job.add_to(cmd);
  cmd->add_option("--out", o->out, "Directory for the files (created)")->required();
  cmd->add_option("--from", o->from,
                  "Start from a checkpoint's parameters (a step directory, checkpoints/ "
                  "or a run directory; any dp/tp/pp layout) instead of the initial ones");
  cmd->footer(
      "Example:\n  trainctl inspect step job.yaml --out step0\n"
      "  /usr/bin/python3 -m venv --system-site-packages v && v/bin/pip install -q safetensors\n"
      "  v/bin/python tests/torch/check_against_torch.py step0   # compare with PyTorch\n\n"
      "Writes weights.safetensors (initial parameters, nanoGPT names), batch.safetensors\n"
      "(tokens, targets), grads.safetensors (gradients of the mean loss of the first\n"
      "micro-batch), updated.safetensors (after clipping and one optimizer step) and\n"
      "step.json (loss, gradient norm, model and optimizer settings).");
  out.push_back({cmd, [o] {
                   std::optional<std::filesystem::path> from;
                   if (!o->from.empty()) from = o->from;
                   return cmd_inspect_step(o->job.job, o->job.overrides, o->out, from);
                 }});
}

}  // namespace trainctl::app
