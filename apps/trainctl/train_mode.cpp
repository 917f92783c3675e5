#include "train_mode.h"

#include "train/trainer.h"
#include "util/exit_codes.h"

namespace trainctl::app {

int run_train_mode(const config::JobSpec& spec, comm::ProcessGroups& groups,
                   const launch::WorkerEnv& env) {
  train::TrainContext ctx;
  ctx.run_dir = env.run_dir;
  ctx.console_fd = env.console_fd;
  train::run_training(spec, groups, ctx);
  return kExitOk;
}

}  // namespace trainctl::app
