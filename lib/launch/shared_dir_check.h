#pragma once
// The start-up check of a multi-node job: before any worker starts, every node proves that
// it sees node 0's run_dir, the same data file and the same job spec
// (launch/node_files_report.h says why each matters). Without it, a run_dir on node-local
// disk trains every step and then fails writing the first checkpoint, losing the run.
//
// The exchange, through the rendezvous store (keys under "startup/"), after all launchers
// joined and before any worker starts:
//   1. node 0 writes a random nonce to run_dir/.shared_dir_check and publishes the nonce;
//   2. every other node reads that file back (retrying for `fs_grace`, since network file
//      systems may show a new file late), writes the nonce to
//      run_dir/.shared_dir_check.node<N> (so it can write there too), fingerprints the
//      data file and the resolved spec, and publishes its report;
//   3. node 0 reads each node's file back, compares every report with its own and
//      publishes the verdict; every node reads it.
// A disagreement raises InputError (exit 2) on every node with the same message, naming
// run_dir (or the data file), the nodes that cannot see it and what to do. The check
// files are removed afterwards.
#include <chrono>
#include <string>

#include "config/job_spec.h"
#include "launch/tcp_store_client.h"

namespace trainctl::launch {

struct SharedFilesCheckOptions {
  int node = 0;
  int nnodes = 1;
  // How messages name this node, e.g. "host h2, 10.77.0.2".
  std::string host;
  // The longest wait for another node's report or for the verdict.
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
  // How long a node keeps looking for a check file that is missing or stale.
  std::chrono::milliseconds fs_grace{std::chrono::seconds(3)};
};

// Collective over every node's launcher (each calls it once, with its own node number).
// Returns when every node sees the same files; does nothing for a single node. Throws
// InputError when they do not, RendezvousError when the store fails or a node does not
// report within options.timeout, std::runtime_error when node 0 cannot write run_dir.
void check_nodes_share_files(TcpStoreClient& store, const config::JobSpec& spec,
                             const std::string& resolved_spec_text,
                             const SharedFilesCheckOptions& options);

}  // namespace trainctl::launch
