#include "launch/launcher.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <thread>

#include "config/load.h"
#include "launch/job_token.h"
#include "launch/launcher_signals.h"
#include "launch/node_heartbeat.h"
#include "launch/prefixed_store.h"
#include "launch/rank_map.h"
#include "launch/run_dir_lock.h"
#include "launch/shared_dir_check.h"
#include "launch/tcp_store_client.h"
#include "launch/tcp_store_server.h"
#include "launch/watchdog.h"
#include "launch/worker_process.h"
#include "util/error.h"
#include "util/exit_codes.h"
#include "util/storage_error.h"

namespace trainctl::launch {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr milliseconds kTick{200};       // supervision loop wake-up
constexpr milliseconds kAbortPoll{500};  // how often other nodes' failures are checked
constexpr size_t kLogTailLines = 20;
// After a worker failed, how long this node watches the other launchers' heartbeats (and
// waits for another node's abort) before it reports the failure as its own.
constexpr milliseconds kNodeSilence{1500};
// How long a node waits for node 0's token file once node 0's store is up (network file
// systems may show a new file late) before it concludes run_dir is not shared.
constexpr milliseconds kTokenFileGrace{10000};

std::string self_exe() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) throw std::runtime_error("cannot resolve /proc/self/exe");
  return std::string(buf, static_cast<size_t>(n));
}

std::string seconds_text(milliseconds ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f s", static_cast<double>(ms.count()) / 1000.0);
  return buf;
}

// Written atomically so that a launcher on another node sharing run_dir never reads
// half a file.
void write_file_atomically(const fs::path& file, const std::string& text, int node_rank) {
  fs::path tmp = file;
  tmp += ".tmp." + std::to_string(node_rank) + "." + std::to_string(::getpid());
  {
    errno = 0;
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    // A full, over-quota or read-only file system is the user's to fix (exit 2, with the
    // reason); the stream leaves the failed write's errno behind.
    if (!out.flush()) throw_write_error(errno != 0 ? errno : EIO, "cannot write", tmp);
  }
  fs::rename(tmp, file);
}

enum class Ending { success, failed, preempted, aborted_elsewhere, store_lost };

struct AttemptResult {
  Ending ending = Ending::success;
  std::string reason;
  int culprit_exit_code = 0;  // the failing worker's exit code (kExitRendezvous matters)
  const WorkerProcess* culprit = nullptr;  // the worker that failed on this node, if any
};

// One launcher's run: the state shared by the steps below.
class Launcher {
 public:
  Launcher(const config::JobSpec& spec, const LaunchOptions& options, LauncherSignals& signals)
      : spec_(spec),
        opt_(options),
        signals_(signals),
        nnodes_(options.cluster.nnodes),
        node_(options.cluster.node_rank),
        per_node_(workers_per_node(spec.world_size(), nnodes_)),
        rendezvous_timeout_(
            milliseconds(static_cast<int64_t>(spec.runtime.comm_timeout_s * 1000.0))) {}

  // Whatever path leaves the launcher (an exception included), no worker outlives it.
  ~Launcher() {
    for (const auto& w : workers_) w.signal(SIGKILL);
    for (auto& w : workers_) {
      while (!w.poll()) std::this_thread::sleep_for(milliseconds(5));
    }
  }
  Launcher(const Launcher&) = delete;
  Launcher& operator=(const Launcher&) = delete;

  int run();

 private:
  void prepare_run_dir();
  // Returns false when a stop signal arrived first.
  bool connect_store();
  bool join_nodes(int attempt);
  // Every node sees node 0's run_dir, data file and spec, else InputError on every node.
  void check_shared_files();
  void start_workers(int attempt);
  void start_servers(int attempt, const std::string& exe, int port);
  WorkerEnv node_env(int attempt, int port) const;
  // "rank R" for a worker, "parameter server S" for a server process.
  std::string label(int rank) const;
  AttemptResult supervise(int attempt);
  void stop_workers(milliseconds grace);
  AttemptResult failure_of(const std::vector<const WorkerProcess*>& ended);
  bool wait_for_other_nodes(int attempt, AttemptResult& result);
  void report_failure(const AttemptResult& r, int attempt);
  std::optional<std::string> watchdog_report(int attempt, int rank);
  void publish_abort(int attempt, const std::string& reason);
  // The abort reason another node published, waiting up to `limit` for one to appear.
  std::optional<std::string> wait_for_abort(int attempt, milliseconds limit);
  std::optional<std::string> abort_reason(int attempt);
  // The other nodes whose launcher stopped beating while this node watched, as
  // "node 1 (10.77.0.2)"; empty when none (or another node published an abort meanwhile).
  std::string silent_nodes(int attempt);
  void beat() {
    if (beats_) beats_->beat();
  }
  int preempted_before_start(int sig);
  void restore_previous_config();

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
  bool killed_early_ = false;  // a second stop signal killed the workers mid-stop
};

// What a stopped run leaves to resume from: the checkpoint checkpoints/latest names (read
// as text: the launcher knows no checkpoint format).
std::string saved_state(const fs::path& run_dir) {
  std::ifstream in(run_dir / "checkpoints" / "latest");
  std::string name;
  if (!(in >> name) || name.empty()) {
    return "no checkpoint has been saved: the next run starts from step 0";
  }
  return "the newest saved checkpoint is " + (run_dir / "checkpoints" / name).string() +
         " (--resume auto continues from it)";
}

// A hint when the file system holding `dir` has (next to) no space left: a worker that
// failed then often could not even write its log.
std::string full_disk_hint(const fs::path& dir) {
  std::error_code ec;
  const fs::space_info space = fs::space(dir, ec);
  if (ec || space.available >= (1u << 20)) return "";
  return "the file system holding " + dir.string() + " has " + std::to_string(space.available) +
         " bytes free: free space there, then resume (--resume auto)";
}

void Launcher::prepare_run_dir() {
  // Node 0 speaks for the job: the lock comes before anything is written into run_dir, so
  // a second job on the same run_dir leaves the first one's files untouched. (The other
  // nodes share node 0's run_dir or have their own; theirs need no lock of their own.)
  if (node_ == 0) run_dir_lock_.emplace(spec_.run_dir, spec_.name, spec_.spec_path);
  fs::create_directories(spec_.run_dir / "logs");
  if (node_ == 0 && fs::is_regular_file(spec_.run_dir / "config.resolved.yaml")) {
    std::ifstream in(spec_.run_dir / "config.resolved.yaml");
    previous_config_ = std::string(std::istreambuf_iterator<char>(in), {});
  }
  write_file_atomically(spec_.run_dir / "config.resolved.yaml", config::to_yaml(spec_), node_);
}

void Launcher::restore_previous_config() {
  if (!previous_config_) return;
  try {
    write_file_atomically(spec_.run_dir / "config.resolved.yaml", *previous_config_, node_);
  } catch (const std::exception& e) {
    spdlog::warn("could not put back the previous config.resolved.yaml: {}", e.what());
  }
}

int Launcher::preempted_before_start(int sig) {
  spdlog::warn("received {} before the workers started: stopping", signal_name(sig));
  return kExitPreempted;
}

bool Launcher::connect_store() {
  const ClusterPlacement& c = opt_.cluster;
  StoreClientOptions client_options;
  client_options.timeout = rendezvous_timeout_;
  if (node_ == 0) {
    token_ = opt_.token ? *opt_.token : generate_token();
    write_token_file(token_file_path(spec_.run_dir), token_);
    server_ = std::make_unique<TcpStoreServer>(token_, c.master_port);
    store_addr_ = "127.0.0.1";
    client_options.connect_timeout = std::chrono::seconds(10);
    store_ = std::make_shared<TcpStoreClient>(store_addr_, server_->port(), token_, client_options);
    if (nnodes_ > 1) {
      spdlog::info("rendezvous store listening on port {} for {} nodes", server_->port(), nnodes_);
    }
    return true;
  }

  // Other nodes: node 0 may start later, and a token file in a reused run_dir may be
  // the previous run's until node 0 replaces it, so keep trying until the deadline.
  store_addr_ = c.master_addr;
  const fs::path token_file = token_file_path(spec_.run_dir);
  const auto deadline = Clock::now() + rendezvous_timeout_;
  std::string last_error = "no token yet: neither --token/TRAINCTL_TOKEN nor " +
                           token_file.string() + " (written by node 0)";
  bool waiting_logged = false;
  // Node 0 writes the token file before its store starts listening: a store that is up
  // while this node finds no current token file means run_dir is not shared with node 0.
  std::optional<Clock::time_point> store_up_without_token;
  while (Clock::now() < deadline) {
    std::optional<std::string> token = opt_.token ? opt_.token : read_token_file(token_file);
    bool token_failed = !token;
    if (token) {
      try {
        client_options.connect_timeout = std::chrono::seconds(2);
        store_ =
            std::make_shared<TcpStoreClient>(c.master_addr, c.master_port, *token, client_options);
        token_ = *token;
        return true;
      } catch (const TokenRejectedError& e) {
        if (opt_.token) throw;  // the user's token is wrong: retrying will not help
        last_error = e.what();
        token_failed = true;
      } catch (const RendezvousError& e) {
        last_error = e.what();
      }
    }
    if (!token_failed) {
      store_up_without_token.reset();
    } else if (!store_up_without_token) {
      if (store_reachable(c.master_addr, c.master_port, milliseconds(500))) {
        store_up_without_token = Clock::now();
      }
    } else if (Clock::now() - *store_up_without_token >= kTokenFileGrace) {
      throw InputError(
          "node " + std::to_string(node_) + ": node 0's rendezvous store at " + c.master_addr +
          ":" + std::to_string(c.master_port) + " is up, but " + token_file.string() +
          ", which node 0 writes before starting it, " +
          (token ? "holds another run's token" : "is missing") + " here after " +
          seconds_text(kTokenFileGrace) + ": run_dir " + spec_.run_dir.string() +
          " is not the directory node 0 uses. Every node writes checkpoints into run_dir, so put "
          "it on a shared file system (NFS, Lustre, ...) or on a directory that every node "
          "mounts at the same path");
    }
    if (!waiting_logged) {
      spdlog::info("waiting for node 0's rendezvous store at {}:{} ({})", c.master_addr,
                   c.master_port, opt_.token ? "token from --token" : "token from the run dir");
      waiting_logged = true;
    }
    if (int sig = signals_.wait(milliseconds(500))) {
      preempted_before_start(sig);
      return false;
    }
  }
  throw RendezvousError("could not join the job's rendezvous store at " + c.master_addr + ":" +
                        std::to_string(c.master_port) + " within " +
                        seconds_text(rendezvous_timeout_) + ": " + last_error);
}

bool Launcher::join_nodes(int attempt) {
  const std::string prefix = attempt_prefix(attempt) + "launcher/";
  store_->set_string(prefix + std::to_string(node_), node_addr_);
  std::vector<std::string> keys;
  for (int n = 0; n < nnodes_; ++n) keys.push_back(prefix + std::to_string(n));
  const auto deadline = Clock::now() + rendezvous_timeout_;
  while (!store_->check(keys)) {
    if (Clock::now() >= deadline) {
      std::string missing;
      for (int n = 0; n < nnodes_; ++n) {
        if (!store_->check({keys[static_cast<size_t>(n)]})) {
          missing += (missing.empty() ? "" : ", ") + std::to_string(n);
        }
      }
      throw RendezvousError(
          "node(s) " + missing + " did not join within " + seconds_text(rendezvous_timeout_) +
          ": start one launcher per node with the same --nnodes, --master-addr and "
          "--master-port (under Slurm: srun --ntasks-per-node=1 trainctl ...), the same "
          "--token/TRAINCTL_TOKEN if one is given, and a run_dir that all nodes share (the "
          "missing node's own log says why it did not join)");
    }
    if (int sig = signals_.wait(kTick)) {
      preempted_before_start(sig);
      return false;
    }
  }
  if (nnodes_ > 1) {
    spdlog::info("all {} nodes joined (attempt {}); this node's workers listen on {}", nnodes_,
                 attempt, node_addr_);
  }
  return true;
}

void Launcher::check_shared_files() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  SharedFilesCheckOptions o;
  o.node = node_;
  o.nnodes = nnodes_;
  o.host = "host " + std::string(host) + ", " + node_addr_;
  o.timeout = rendezvous_timeout_;
  check_nodes_share_files(*store_, spec_, config::to_yaml(spec_), o);
}

// What every process this launcher starts in `attempt` shares (the rest is per rank).
WorkerEnv Launcher::node_env(int attempt, int port) const {
  WorkerEnv env;
  env.world_size = spec_.world_size();
  env.node_rank = node_;
  env.nnodes = nnodes_;
  env.store_addr = store_addr_;
  env.store_port = port;
  env.token = token_;
  env.node_addr = node_addr_;
  env.run_dir = spec_.run_dir;
  env.config = spec_.run_dir / "config.resolved.yaml";
  env.mode = opt_.mode;
  env.restart = attempt;
  return env;
}

void Launcher::start_workers(int attempt) {
  const std::string exe = opt_.worker_exe.empty() ? self_exe() : opt_.worker_exe;
  const int port = server_ ? server_->port() : opt_.cluster.master_port;
  workers_.clear();
  workers_.reserve(static_cast<size_t>(per_node_ + spec_.parallel.ps_servers));
  for (int local = 0; local < per_node_; ++local) {
    WorkerEnv env = node_env(attempt, port);
    env.rank = node_ * per_node_ + local;
    env.local_rank = local;
    env.console_fd = env.rank == 0 ? kConsoleFd : -1;

    WorkerCommand cmd;
    cmd.exe = exe;
    cmd.args = {"worker"};
    cmd.env = worker_env_vars(env);
    cmd.env.insert(cmd.env.end(), opt_.worker_env.begin(), opt_.worker_env.end());
    cmd.log_path = spec_.run_dir / "logs" / ("rank" + std::to_string(env.rank) + ".log");
    cmd.console = env.rank == 0;
    workers_.emplace_back(env.rank, cmd, signals_.original_mask());
  }
  spdlog::info("started {} worker(s) for ranks {}..{} (attempt {}); logs in {}", per_node_,
               node_ * per_node_, node_ * per_node_ + per_node_ - 1, attempt,
               (spec_.run_dir / "logs").string());
  // Only training talks to servers: eval, selftest and bench-comm of the same job would
  // leave them waiting for workers that never come (issue 36).
  if (spec_.parallel.mode == "parameter_server" && node_ == 0 && opt_.mode == WorkerMode::train) {
    start_servers(attempt, exe, port);
  }
}

// parallel.mode: parameter_server: the servers run on node 0 beside its workers, as
// processes supervised like them (a server that dies fails the attempt, which restarts
// from the last checkpoint like any other failure). They are `trainctl worker` with
// TRAINCTL_PS_SERVER set, ranks world_size + s in the launcher's accounting only.
void Launcher::start_servers(int attempt, const std::string& exe, int port) {
  const int servers = spec_.parallel.ps_servers;
  for (int s = 0; s < servers; ++s) {
    WorkerEnv env = node_env(attempt, port);
    env.rank = spec_.world_size() + s;
    env.local_rank = per_node_ + s;
    env.ps_server = s;
    WorkerCommand cmd;
    cmd.exe = exe;
    cmd.args = {"worker"};
    cmd.env = worker_env_vars(env);
    cmd.env.insert(cmd.env.end(), opt_.worker_env.begin(), opt_.worker_env.end());
    cmd.log_path = spec_.run_dir / "logs" / ("server" + std::to_string(s) + ".log");
    workers_.emplace_back(env.rank, cmd, signals_.original_mask());
  }
  spdlog::info("started {} parameter server(s) (attempt {}); logs in {}/server<S>.log", servers,
               attempt, (spec_.run_dir / "logs").string());
}

std::string Launcher::label(int rank) const {
  if (rank >= spec_.world_size()) {
    return "parameter server " + std::to_string(rank - spec_.world_size());
  }
  return "rank " + std::to_string(rank);
}

void Launcher::stop_workers(milliseconds grace) {
  for (const auto& w : workers_) w.signal(SIGTERM);
  const auto deadline = Clock::now() + grace;
  auto any_running = [&] {
    bool running = false;
    for (auto& w : workers_) running = !w.poll() || running;
    return running;
  };
  bool hurried = false;
  while (any_running() && Clock::now() < deadline) {
    beat();
    if (int sig = signals_.wait(milliseconds(50))) {
      spdlog::warn("received {} again: killing the workers now (no waiting for a checkpoint)",
                   signal_name(sig));
      hurried = true;
      killed_early_ = true;
      break;
    }
  }
  bool killed = false;
  for (const auto& w : workers_) {
    if (w.running()) {
      w.signal(SIGKILL);
      killed = true;
    }
  }
  if (killed && !hurried) {
    spdlog::warn("workers still running after {}: sent SIGKILL", seconds_text(grace));
  }
  while (any_running()) std::this_thread::sleep_for(milliseconds(10));
}

// A worker stopped by SIGTERM/SIGINT (or exiting with kExitPreempted) was stopped from
// outside the launcher, e.g. by Slurm signalling every process of the job.
bool stopped_from_outside(const WorkerProcess& w) {
  return w.exit_code() == kExitPreempted || w.term_signal() == SIGTERM || w.term_signal() == SIGINT;
}

AttemptResult Launcher::failure_of(const std::vector<const WorkerProcess*>& ended) {
  // The root cause is most likely a worker that died from a signal; the others of the
  // same instant usually exit 1 because their peer vanished.
  const WorkerProcess* culprit = nullptr;
  for (const auto* w : ended) {
    if (!stopped_from_outside(*w) && w->term_signal() != 0) {
      culprit = w;
      break;
    }
  }
  // Next, a worker that refused its input or environment (exit 2: a checkpoint of another
  // model, a full disk): its peers' failures at the same instant are echoes of it, and the
  // job must end with 2, not be restarted into the same wall.
  for (const auto* w : ended) {
    if (culprit == nullptr && w->exit_code() == kExitBadInput) culprit = w;
  }
  for (const auto* w : ended) {
    if (culprit == nullptr && !stopped_from_outside(*w)) culprit = w;
  }
  AttemptResult r;
  if (culprit == nullptr) {
    r.ending = Ending::preempted;
    r.reason = "preempted: " + label(ended.front()->rank()) + " was stopped (" +
               ended.front()->describe_exit() + ")";
    return r;
  }
  r.ending = Ending::failed;
  r.culprit = culprit;
  r.culprit_exit_code = culprit->exit_code();
  r.reason = label(culprit->rank()) + " on node " + std::to_string(node_) +
             " failed: " + culprit->describe_exit();
  return r;
}

// The report the hang watchdog of `rank` left when it fired (launch/watchdog.h), if any.
std::optional<std::string> Launcher::watchdog_report(int attempt, int rank) {
  try {
    const std::string key = attempt_prefix(attempt) + "watchdog/" + watchdog_report_key(rank);
    if (!store_ || !store_->check({key})) return std::nullopt;
    return store_->get_string(key, std::chrono::seconds(2));
  } catch (const RendezvousError&) {
    return std::nullopt;
  }
}

void Launcher::report_failure(const AttemptResult& r, int attempt) {
  // A rank whose watchdog fired did not fail: it gave up waiting for the ranks its report
  // names. Lead with that report rather than "rank R failed".
  if (auto report = watchdog_report(attempt, r.culprit->rank())) {
    spdlog::error("rank {} on node {} stopped the job after runtime.comm_timeout_s: {}",
                  r.culprit->rank(), node_, *report);
    spdlog::error("({}, pid {}, then exited: {})", label(r.culprit->rank()), r.culprit->pid(),
                  r.culprit->describe_exit());
  } else {
    spdlog::error("{} (pid {})", r.reason, r.culprit->pid());
  }
  std::vector<std::string> tail =
      tail_lines(r.culprit->log_path(), kLogTailLines, r.culprit->log_start());
  std::string text =
      "last " + std::to_string(tail.size()) + " lines of " + r.culprit->log_path().string() + ":\n";
  for (const auto& line : tail) text += "  | " + line + "\n";
  if (const std::string hint = full_disk_hint(spec_.run_dir); !hint.empty()) {
    text += "note: " + hint + "\n";
  }
  std::fputs(text.c_str(), stderr);
  std::fflush(stderr);
}

void Launcher::publish_abort(int attempt, const std::string& reason) {
  if (nnodes_ == 1) return;
  try {
    // First writer wins: the first failure is the root cause, later ones its echoes.
    const std::string prefix = attempt_prefix(attempt);
    if (store_->add(prefix + "job/abort_writers", 1) == 1) {
      store_->set_string(prefix + kAbortKey, "node " + std::to_string(node_) + ": " + reason);
    }
  } catch (const RendezvousError& e) {
    spdlog::warn("could not tell the other nodes to stop: {}", e.what());
  }
}

std::optional<std::string> Launcher::wait_for_abort(int attempt, milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  try {
    for (;;) {
      if (auto reason = abort_reason(attempt)) return reason;
      if (Clock::now() >= deadline) return std::nullopt;
      beat();
      std::this_thread::sleep_for(milliseconds(100));
    }
  } catch (const RendezvousError&) {
    return std::nullopt;  // the store is gone: report our own failure
  }
}

std::optional<std::string> Launcher::abort_reason(int attempt) {
  const std::string key = attempt_prefix(attempt) + kAbortKey;
  if (!store_->check({key})) return std::nullopt;
  return store_->get_string(key, std::chrono::seconds(5));
}

std::string Launcher::silent_nodes(int attempt) {
  if (node_ != 0) {
    try {
      store_->check({kAbortKey});
    } catch (const RendezvousError&) {
      return "node 0 (" + opt_.cluster.master_addr + ", whose rendezvous store is gone)";
    }
  }
  const std::vector<int64_t> before = beats_->sample();
  if (wait_for_abort(attempt, kNodeSilence)) return "";
  std::string names;
  for (int n : beats_->silent_between(before, beats_->sample())) {
    std::string addr;
    try {
      addr = store_->get_string(attempt_prefix(attempt) + "launcher/" + std::to_string(n),
                                milliseconds(1000));
    } catch (const RendezvousError&) {
    }
    names += (names.empty() ? "" : ", ") + ("node " + std::to_string(n)) +
             (addr.empty() ? "" : " (" + addr + ")");
  }
  return names;
}

AttemptResult Launcher::supervise(int attempt) {
  auto next_abort_poll = Clock::now() + kAbortPoll;
  if (nnodes_ > 1) beats_.emplace(*store_, attempt_prefix(attempt) + "beat/", node_, nnodes_);
  for (;;) {
    beat();
    std::vector<const WorkerProcess*> failed;
    bool all_done = true;
    for (auto& w : workers_) {
      if (!w.poll()) {
        all_done = false;
      } else if (!w.succeeded()) {
        failed.push_back(&w);
      }
    }
    if (!failed.empty()) {
      AttemptResult r = failure_of(failed);
      // A worker that merely exited non-zero on a multi-node job most often lost a peer
      // on another node; that node's launcher names the real cause within a poll or two.
      if (r.ending == Ending::failed && nnodes_ > 1 && r.culprit->term_signal() == 0) {
        if (auto elsewhere = wait_for_abort(attempt, kAbortPoll * 2)) {
          spdlog::error("stopping this node's workers: the job failed on {} (then this node's {})",
                        *elsewhere, r.reason);
          stop_workers(opt_.failure_grace);
          return {Ending::aborted_elsewhere, *elsewhere, 0, nullptr};
        }
        // No abort: maybe another node's launcher is gone and could not publish one. An
        // abort that appears meanwhile (a node that was only slow to say) wins.
        const std::string gone = silent_nodes(attempt);
        if (auto elsewhere = wait_for_abort(attempt, milliseconds(0))) {
          spdlog::error("stopping this node's workers: the job failed on {} (then this node's {})",
                        *elsewhere, r.reason);
          stop_workers(opt_.failure_grace);
          return {Ending::aborted_elsewhere, *elsewhere, 0, nullptr};
        }
        if (!gone.empty()) {
          r.reason = gone +
                     " stopped responding (its launcher was killed, or its host went "
                     "down or became unreachable); then " +
                     r.reason;
        }
      }
      if (r.ending == Ending::failed) report_failure(r, attempt);
      publish_abort(attempt, r.reason);
      if (r.ending == Ending::preempted) {
        spdlog::warn("{}: stopping the other workers", r.reason);
        stop_workers(opt_.preempt_grace);
      } else {
        stop_workers(opt_.failure_grace);
      }
      return r;
    }
    if (all_done) return {};

    if (int sig = signals_.wait(kTick)) {
      AttemptResult r{
          Ending::preempted,
          std::string("preempted: node ") + std::to_string(node_) + " received " + signal_name(sig),
          0, nullptr};
      spdlog::warn("received {}: asking the workers to stop (SIGTERM; {} to finish)",
                   signal_name(sig), seconds_text(opt_.preempt_grace));
      publish_abort(attempt, r.reason);
      stop_workers(opt_.preempt_grace);
      return r;
    }

    if (nnodes_ > 1 && Clock::now() >= next_abort_poll) {
      next_abort_poll = Clock::now() + kAbortPoll;
      try {
        if (auto reason = abort_reason(attempt)) {
          spdlog::error("stopping this node's workers: the job stopped on {}", *reason);
          stop_workers(opt_.failure_grace);
          bool preempted = reason->find(": preempted") != std::string::npos;
          return {preempted ? Ending::preempted : Ending::aborted_elsewhere, *reason, 0, nullptr};
        }
      } catch (const RendezvousError& e) {
        spdlog::error("lost the rendezvous store ({}): stopping this node's workers", e.what());
        stop_workers(opt_.failure_grace);
        return {Ending::store_lost, e.what(), 0, nullptr};
      }
    }
  }
}

// After this node's workers all succeeded. Other nodes leave at once; node 0 keeps the
// store up until every node reported success (or one failed), so no node loses the
// store while its workers are still finishing.
bool Launcher::wait_for_other_nodes(int attempt, AttemptResult& result) {
  if (nnodes_ == 1) return true;
  const std::string done_key = attempt_prefix(attempt) + "job/nodes_done";
  try {
    if (beats_) beats_->done();
    int64_t done = store_->add(done_key, 1);
    if (node_ != 0) return true;
    const auto deadline = Clock::now() + rendezvous_timeout_;
    while (done < nnodes_) {
      if (auto reason = abort_reason(attempt)) {
        result = {Ending::aborted_elsewhere, *reason, 0, nullptr};
        return false;
      }
      if (Clock::now() >= deadline) {
        result = {Ending::failed,
                  "only " + std::to_string(done) + " of " + std::to_string(nnodes_) +
                      " nodes finished within " + seconds_text(rendezvous_timeout_),
                  0, nullptr};
        return false;
      }
      if (int sig = signals_.wait(kTick)) {
        result = {Ending::preempted, std::string("received ") + signal_name(sig), 0, nullptr};
        return false;
      }
      done = store_->add(done_key, 0);
    }
  } catch (const RendezvousError& e) {
    result = {Ending::store_lost, e.what(), 0, nullptr};
    return false;
  }
  return true;
}

int Launcher::run() {
  prepare_run_dir();
  if (opt_.node_addr) {
    node_addr_ = *opt_.node_addr;
  } else if (nnodes_ == 1) {
    node_addr_ = "127.0.0.1";
  } else {
    node_addr_ = local_address_towards(opt_.cluster.master_addr, opt_.cluster.master_port);
  }
  spdlog::info(
      "job '{}': world size {} (dp {} x tp {} x pp {}), node {} of {} runs {} worker(s); "
      "run dir {}",
      spec_.name, spec_.world_size(), spec_.parallel.dp, spec_.parallel.tp, spec_.parallel.pp,
      node_, nnodes_, per_node_, spec_.run_dir.string());
  if (!connect_store()) return kExitPreempted;

  const int max_restarts = std::max(0, spec_.runtime.max_restarts);
  for (int attempt = 0;; ++attempt) {
    if (!join_nodes(attempt)) return kExitPreempted;
    if (attempt == 0) check_shared_files();
    start_workers(attempt);
    AttemptResult r = supervise(attempt);
    if (r.ending == Ending::success && wait_for_other_nodes(attempt, r)) {
      spdlog::info("all workers finished");
      return kExitOk;
    }
    switch (r.ending) {
      case Ending::success:
        break;  // unreachable: wait_for_other_nodes changed the result
      case Ending::preempted:
        spdlog::warn("stopped ({}): exit code {} (preempted){}", r.reason, int{kExitPreempted},
                     killed_early_ ? "; the workers were killed before they finished stopping, "
                                     "so no stop checkpoint was written"
                                   : "");
        if (node_ == 0) spdlog::warn("{}", saved_state(spec_.run_dir));
        return kExitPreempted;
      case Ending::store_lost:
        spdlog::error("node 0's launcher is gone; the job cannot continue on this node");
        return kExitWorkerFailed;
      case Ending::failed:
      case Ending::aborted_elsewhere:
        // A worker that found bad input (exit 2) would find it again after a restart.
        if (attempt < max_restarts && r.culprit_exit_code != kExitBadInput) {
          spdlog::warn("restarting all workers (restart {} of {})", attempt + 1, max_restarts);
          continue;
        }
        if (node_ == 0 && nnodes_ > 1) {
          // Give the other nodes' launchers a poll interval to read the reason before the
          // store closes with this process.
          std::this_thread::sleep_for(kAbortPoll * 2);
        }
        if (r.culprit_exit_code == kExitRendezvous) return kExitRendezvous;
        if (r.culprit_exit_code == kExitBadInput) {
          restore_previous_config();
          return kExitBadInput;
        }
        return kExitWorkerFailed;
    }
  }
}

}  // namespace

int run_launcher(const config::JobSpec& spec, const LaunchOptions& options) {
  LauncherSignals signals;
  Launcher launcher(spec, options, signals);
  return launcher.run();
}

}  // namespace trainctl::launch
