#pragma once
// What the commands that start workers share (train, eval, selftest, bench comm, validate):
// the launcher's options from the command line, the GPU check of device: cuda, and the
// CPU-kernel and version lines.
#include <string>
#include <vector>

#include "commands.h"
#include "config/job_spec.h"
#include "launch/launcher.h"

namespace trainctl::app {

// The launcher's options for `mode`: the cluster (flags, Slurm or one node), the job token,
// and the CPU kernel path the workers inherit.
launch::LaunchOptions launch_options(const LaunchArgs& args, launch::WorkerMode mode);

// device: cuda runs one worker per visible GPU on each node (worker i on visible GPU i):
// refuses (exit 2) when the plugin, the CUDA libraries or enough GPUs are missing, and
// returns the GPUs' descriptions for the rank map. Empty for device: cpu.
std::vector<std::string> check_gpus(const config::JobSpec& spec, int nnodes);

}  // namespace trainctl::app
