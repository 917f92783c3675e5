#pragma once
// The training loop of a parameter-server worker (parallel.mode: parameter_server;
// servers: lib/ps/ps_server.h). Each of the dp workers holds the whole model and, step
// after step, without waiting for the others:
//   reads its share of the step's batch (its local step's global batch, its dp slice);
//   computes its mean gradient, clips it (training.grad_clip bounds each worker's own);
//   pushes it to the servers and receives the parameters they hold after applying it.
// The servers bound how stale a gradient may be (parameter_server.max_staleness; 0 is
// synchronous data parallelism, step for step) and count the run's token budget:
// training.steps global steps of global_batch_size sequences, however the workers share
// them. Server 0 asks for checkpoints, relays stop requests and says when the budget is
// spent; the workers then save together (worker 0 writes the servers' parameters and
// optimizer state in the usual checkpoint format, which resumes on any number of servers,
// or in any other layout), and worker 0 exports the model and reports.
//
// Worker 0 logs metrics.jsonl at the global steps it sees: the loss of every gradient the
// servers applied since its previous line, and their staleness (metrics.h, ps_*).
#include "comm/process_groups.h"
#include "train/run_options.h"
#include "train/trainer.h"

namespace trainctl::train {

TrainResult run_ps_training(const RunOptions& options, comm::ProcessGroups& groups,
                            const TrainContext& ctx);

}  // namespace trainctl::train
