#include "train_mode.h"

#include <cstdlib>

#include "launch/worker_signals.h"
#include "train/trainer.h"
#include "util/exit_codes.h"

namespace trainctl::app {

int run_train_mode(const config::JobSpec& spec, comm::ProcessGroups& groups,
                   const launch::WorkerEnv& env) {
  // The engine polls for a stop once per step (worker_main installed the handlers), so
  // SIGTERM/SIGINT/SIGUSR1 end the run at a step boundary, metrics flushed, model exported.
  train::TrainContext ctx;
  ctx.run_dir = env.run_dir;
  ctx.console_fd = env.console_fd;
  ctx.local_rank = env.local_rank;
  ctx.should_stop = [] { return launch::stop_requested(); };
  // A restart after a failure always continues from the newest checkpoint of the run.
  const char* resume = std::getenv("TRAINCTL_RESUME");
  ctx.resume = env.restart > 0 ? "auto" : (resume != nullptr && *resume != '\0' ? resume : "auto");
  const train::TrainResult result = train::run_training(spec, groups, ctx);
  return result.stopped ? kExitPreempted : kExitOk;
}

}  // namespace trainctl::app
