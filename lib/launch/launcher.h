#pragma once
// The launcher: one per node. It prepares the run directory, hosts (node 0) or joins the
// rendezvous store, starts one worker process per local slot, supervises them and turns
// what happened into an exit code (util/exit_codes.h):
//   kExitOk            every worker on every node finished
//   kExitWorkerFailed  a worker exited non-zero or died from a signal (here or on another
//                      node), after max_restarts restarts; the failing rank, how it ended
//                      and the tail of its log are printed. Or another node's launcher
//                      stopped responding (killed, its host down): however this node
//                      notices (its workers failing, hanging, or the heartbeats), it names
//                      that node ("node 1 (ADDR) stopped responding ...")
//   kExitPreempted     SIGINT, SIGTERM or SIGUSR1 reached the launcher (or a worker was
//                      stopped from outside): workers got SIGTERM and time to finish
//   kExitRendezvous    a worker could not connect (it exited with that code)
//   kExitBadInput      a worker refused its input or environment (it exited with that
//                      code: a checkpoint of another model, a full or read-only disk); never
//                      restarted, and node 0 puts back the run's previous config.resolved.yaml
// A worker whose hang watchdog fired leaves its report in the store; the launcher prints
// it first (it names the ranks that did not arrive). After a stop signal the launcher says
// which checkpoint a resume continues from; a second signal kills the workers at once
// (still kExitPreempted) and says that no stop checkpoint was written.
// Bad input (layout not divisible by the node count) raises InputError and a store that
// cannot be reached or joined raises RendezvousError, both before any worker starts.
// Node 0's launcher first locks run_dir for the whole job (launch/run_dir_lock.h): while
// another live job holds it, InputError names that job and nothing is written to run_dir.
//
// Workers never outlive the launcher: they are stopped on every path out of
// run_launcher, and PR_SET_PDEATHSIG kills them if the launcher itself is killed.
#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/job_spec.h"
#include "launch/cluster_env.h"
#include "launch/worker_env.h"

namespace trainctl::launch {

struct LaunchOptions {
  WorkerMode mode = WorkerMode::train;
  ClusterPlacement cluster;
  // The job token (--token or TRAINCTL_TOKEN). Unset: node 0 generates one and writes it
  // to run_dir/.rendezvous_token; other nodes wait for that file.
  std::optional<std::string> token;
  // This node's address as other nodes reach it (--node-addr). Unset: 127.0.0.1 on a
  // single node, else the local address of the route to the master.
  std::optional<std::string> node_addr;
  // Extra variables for every worker (TRAINCTL_SELFTEST_REPEAT, bench options, ...).
  std::vector<std::pair<std::string, std::string>> worker_env;
  // The worker program; empty: this executable, run as `<exe> worker`.
  std::string worker_exe;
  // After a failure, how long the other workers get between SIGTERM and SIGKILL.
  std::chrono::milliseconds failure_grace{std::chrono::seconds(3)};
  // After a stop signal, how long workers get to finish (e.g. write a checkpoint). A
  // second signal kills them at once.
  std::chrono::milliseconds preempt_grace{std::chrono::seconds(30)};
  // `train --resume none`: the job starts over. Node 0 refuses a run_dir that holds an
  // earlier run (launch/run_history.h) unless `overwrite_run` (--overwrite), which moves
  // that run to run_dir/previous-<time>/ first.
  bool fresh_start = false;
  bool overwrite_run = false;
};

// Blocks until the job ends on this node. Call from the main thread of a process that
// has started no other threads (the signal mask is inherited by threads).
int run_launcher(const config::JobSpec& spec, const LaunchOptions& options);

// The key (under the attempt prefix) a launcher sets, with the reason as value, when the
// job must stop on every node; values starting with "preempted" mean a stop signal.
inline constexpr const char* kAbortKey = "job/abort";

}  // namespace trainctl::launch
