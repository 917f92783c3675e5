#pragma once
// The training loop of runtime.fault_tolerance (docs/fault-tolerance.md): this worker's
// replica (its tp x pp x cp ranks, connected among themselves as a job of dp 1) trains with
// the other live replicas and keeps training when one dies.
//
// Each step: the replica computes its gradients on its own share of the global batch
// (its micro-batches, as data-parallel rank `replica` of parallel.dp); the live replicas sum
// them over the epoch's gradient groups (parallel/replica_exchange.h) and scale by
// dp / live, so the update is the mean over the tokens the live replicas trained on; the
// replicas vote on the step (launch/ft_quorum.h) and apply it only if every member's
// exchange completed. A failed step is trained again by the next epoch's members. The
// micro-batches a dead replica would have read are skipped, not handed to another: the
// data position depends only on the step, so every replica reads what it always would,
// and run_dir/membership.jsonl records who trained each step (replayable with
// runtime.fault_tolerance.replay).
//
// The epoch's primary replica (its lowest member holding the state) writes metrics.jsonl,
// membership.jsonl, checkpoints and the exported model.
#include <memory>
#include <string>

#include "comm/gloo/gloo_options.h"
#include "comm/process_groups.h"
#include "launch/tcp_store_client.h"
#include "train/run_options.h"
#include "train/trainer.h"

namespace trainctl::train {

// What the worker's connection step (worker/connect.h) knows and the loop needs.
struct ElasticContext {
  int replica = 0;     // this replica's index, its data-parallel rank among parallel.dp
  int generation = 0;  // how many times its processes were restarted (0: first start)
  int attempt = 0;     // the job's attempt (runtime.max_restarts)
  std::shared_ptr<launch::TcpStoreClient> store;
  std::string store_prefix;  // the attempt's prefix
  // The rendezvous store's address for the heartbeat's own connection.
  std::string store_addr;
  int store_port = 0;
  std::string token;
  std::string node_addr;  // where this worker's gradient groups listen
  comm::GlooOptions gloo;
};

// Throws QuorumLost (launch/ft_quorum.h) when fewer than min_replicas remain.
TrainResult run_elastic_training(const RunOptions& options, comm::ProcessGroups& groups,
                                 const TrainContext& ctx);

}  // namespace trainctl::train
