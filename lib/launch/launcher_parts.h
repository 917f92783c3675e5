#pragma once
// The launcher (launcher.h) is one class whose steps live in several files, one job each.
// This header is theirs alone (lib/launch/launcher*.cpp); nothing else includes it.
//   launcher.cpp            run_launcher and the attempt loop: restarts and exit codes
//   launcher_startup.cpp    run_dir, the rendezvous store, the nodes joining, the start-up
//                           check that every node sees the same files
//   launcher_spawn.cpp      starting and stopping this node's workers (and servers)
//   launcher_supervise.cpp  watching the workers, the stop signals and the other nodes
//                           during an attempt, and deciding how it ended
//   launcher_nodes.cpp      what the nodes tell each other: abort reasons, heartbeats
//   launcher_report.cpp     what the user reads about a failure or a stop
//   launcher_replicas.cpp   fault tolerance: one replica's workers restarted alone
#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/job_spec.h"
#include "launch/launcher.h"
#include "launch/launcher_signals.h"
#include "launch/node_heartbeat.h"
#include "launch/run_dir_lock.h"
#include "launch/tcp_store_client.h"
#include "launch/tcp_store_server.h"
#include "launch/worker_env.h"
#include "launch/worker_process.h"

namespace trainctl::launch::detail {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

inline constexpr milliseconds kTick{200};       // supervision loop wake-up
inline constexpr milliseconds kAbortPoll{500};  // how often other nodes' failures are checked
inline constexpr size_t kLogTailLines = 20;
// After a worker failed, how long this node watches the other launchers' heartbeats (and
// waits for another node's abort) before it reports the failure as its own.
inline constexpr milliseconds kNodeSilence{1500};
// While the workers run, how long another node's launcher may not beat before this node
// names it as gone and stops: its workers may well be dead without the workers here
// noticing (a peer that vanishes mid-collective, a host that went down), and only the
// hang watchdog (runtime.comm_timeout_s) would end the job otherwise. Twenty beat
// intervals: a launcher on a loaded machine still beats well within it.
inline constexpr milliseconds kNodeLost{5000};
// How long a node waits for node 0's token file once node 0's store is up (network file
// systems may show a new file late) before it concludes run_dir is not shared.
inline constexpr milliseconds kTokenFileGrace{10000};

// "3 s" for 3000 ms.
std::string seconds_text(milliseconds ms);

enum class Ending { success, failed, preempted, aborted_elsewhere, store_lost };

struct AttemptResult {
  Ending ending = Ending::success;
  std::string reason;
  int culprit_exit_code = 0;  // the failing worker's exit code (kExitRendezvous matters)
  const WorkerProcess* culprit = nullptr;  // the worker that failed on this node, if any
  // The other nodes that stopped responding meanwhile, as stopped_responding() says it,
  // when they are the likely cause ("" when none): printed before a watchdog's report.
  std::string lost_nodes;
};

inline AttemptResult ended(Ending ending, std::string reason) {
  AttemptResult r;
  r.ending = ending;
  r.reason = std::move(reason);
  return r;
}

// "node 1 (10.0.0.2) stopped responding (its launcher was killed, ...)" for `names`.
std::string stopped_responding(const std::string& names);

// One launcher's run: the state shared by the steps below.
class Launcher {
 public:
  Launcher(const config::JobSpec& spec, const LaunchOptions& options, LauncherSignals& signals);
  // Whatever path leaves the launcher (an exception included), no worker outlives it.
  ~Launcher();
  Launcher(const Launcher&) = delete;
  Launcher& operator=(const Launcher&) = delete;

  int run();

 private:
  // launcher.cpp: what an attempt's ending means for the job: nullopt to restart, else
  // the exit code.
  std::optional<int> conclude(const AttemptResult& r, int attempt);

  // launcher_startup.cpp
  void prepare_run_dir();
  void keep_one_history();
  void choose_node_addr();
  void restore_previous_config();
  // Returns false when a stop signal arrived first.
  bool connect_store();
  // Nodes other than 0: waits for node 0's store and token (false: a stop signal came first).
  bool connect_to_node0_store(StoreClientOptions& client_options);
  bool join_nodes(int attempt);
  // Every node sees node 0's run_dir, data file and spec, else InputError on every node.
  void check_shared_files();
  int preempted_before_start(int sig);

  // launcher_spawn.cpp
  void start_workers(int attempt);
  // This node's worker `local` (its local rank), `generation`: its replica's restarts
  // (runtime.fault_tolerance; 0 otherwise).
  WorkerProcess spawn_worker(int attempt, int local, int generation);
  void start_servers(int attempt, const std::string& exe, int port);
  WorkerEnv node_env(int attempt, int port) const;
  WorkerCommand command_for(const WorkerEnv& env, const std::string& exe,
                            const std::string& log_name) const;
  void stop_workers(milliseconds grace);
  // "rank R" for a worker, "parameter server S" for a server process.
  std::string label(int rank) const;

  // launcher_supervise.cpp
  AttemptResult supervise(int attempt);
  AttemptResult on_workers_failed(int attempt, const std::vector<const WorkerProcess*>& failed);
  std::optional<AttemptResult> on_stop_signal(int attempt);
  std::optional<AttemptResult> poll_other_nodes(int attempt);
  AttemptResult on_nodes_lost(int attempt, const std::string& lost);
  AttemptResult failure_of(const std::vector<const WorkerProcess*>& exited);
  bool wait_for_other_nodes(int attempt, AttemptResult& result);

  // launcher_replicas.cpp (runtime.fault_tolerance): restarts the replicas of `failed`
  // alone, the other workers untouched; false when a failure must end the attempt
  // instead (bad input, the quorum lost, a replica out of max_replica_restarts, a failed
  // connection).
  bool restart_failed_replicas(int attempt, const std::vector<const WorkerProcess*>& failed);
  // The generation this node's workers of `replica` start as: 0 for a new job; one past
  // the deaths counted so far when this launcher rejoins a running fault-tolerant attempt
  // (it was killed and started again), counting its old processes' death.
  int starting_generation(int attempt, int replica);
  bool fault_tolerant() const {
    return spec_.runtime.fault_tolerance.enabled && opt_.mode == WorkerMode::train;
  }

  // launcher_nodes.cpp
  void publish_abort(int attempt, const std::string& reason);
  // The abort reason another node published, waiting up to `limit` for one to appear.
  std::optional<std::string> wait_for_abort(int attempt, milliseconds limit);
  std::optional<std::string> abort_reason(int attempt);
  // The other nodes whose launcher stopped beating while this node watched, as
  // "node 1 (10.77.0.2)"; empty when none (or another node published an abort meanwhile).
  std::string silent_nodes(int attempt);
  // While supervising: the other nodes whose launcher has not beaten for kNodeLost, as
  // stopped_responding() says it; nullopt when every node beats (or is done).
  std::optional<std::string> lost_nodes(int attempt);
  // "node 1 (10.77.0.2), node 2 (10.77.0.3)": the nodes with the address they joined with.
  std::string node_names(int attempt, const std::vector<int>& nodes);
  // "node 0 (10.77.0.1, whose rendezvous store is gone)", for a node other than 0.
  std::string node0_gone() const;
  void beat() {
    if (beats_) beats_->beat();
  }

  // launcher_report.cpp
  void report_failure(const AttemptResult& r, int attempt);
  std::optional<std::string> watchdog_report(int attempt, int rank);

  const config::JobSpec& spec_;
  const LaunchOptions& opt_;
  LauncherSignals& signals_;
  const int nnodes_;
  const int node_;
  const int per_node_;
  const milliseconds rendezvous_timeout_;
  std::string token_;
  std::string node_addr_;
  std::string store_addr_;  // as this node's workers reach it
  std::unique_ptr<TcpStoreServer> server_;
  std::shared_ptr<TcpStoreClient> store_;
  std::vector<WorkerProcess> workers_;
  std::optional<RunDirLock> run_dir_lock_;  // node 0: held until the launcher ends
  std::optional<NodeHeartbeats> beats_;     // multi-node: this attempt's launcher heartbeats
  // config.resolved.yaml as it was before this job (nullopt: there was none), put back when
  // the workers refuse the job as bad input: a refused job leaves the run as it found it.
  std::optional<std::string> previous_config_;
  bool killed_early_ = false;          // a second stop signal killed the workers mid-stop
  std::vector<int> replica_restarts_;  // runtime.fault_tolerance: per replica, this attempt
  std::string reported_lost_;          // the lost nodes last logged (fault tolerance)
};

// launcher_report.cpp: what a stopped run leaves to resume from, for the user.
std::string saved_state(const std::filesystem::path& run_dir);

}  // namespace trainctl::launch::detail
