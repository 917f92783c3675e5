// Before any worker starts: run_dir (locked and given the resolved spec), this node's
// address, the rendezvous store (node 0 hosts it, the others join it with the job token),
// every node joining each attempt, and the check that all nodes see the same files.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <iterator>

#include "config/load.h"
#include "launch/job_token.h"
#include "launch/launcher_parts.h"
#include "launch/prefixed_store.h"
#include "launch/run_history.h"
#include "launch/shared_dir_check.h"
#include "util/error.h"
#include "util/exit_codes.h"
#include "util/storage_error.h"

namespace trainctl::launch::detail {
namespace {

namespace fs = std::filesystem;

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

}  // namespace

void Launcher::prepare_run_dir() {
  // Node 0 speaks for the job: the lock comes before anything is written into run_dir, so
  // a second job on the same run_dir leaves the first one's files untouched. (The other
  // nodes share node 0's run_dir or have their own; theirs need no lock of their own.)
  if (node_ == 0) run_dir_lock_.emplace(spec_.run_dir, spec_.name, spec_.spec_path);
  if (node_ == 0 && opt_.fresh_start) keep_one_history();
  fs::create_directories(spec_.run_dir / "logs");
  if (node_ == 0 && fs::is_regular_file(spec_.run_dir / "config.resolved.yaml")) {
    std::ifstream in(spec_.run_dir / "config.resolved.yaml");
    previous_config_ = std::string(std::istreambuf_iterator<char>(in), {});
  }
  write_file_atomically(spec_.run_dir / "config.resolved.yaml", config::to_yaml(spec_), node_);
}

// --resume none on a run_dir that holds an earlier run: refused, or with --overwrite that
// run moved aside whole, so metrics, checkpoints and TensorBoard never mix two runs.
void Launcher::keep_one_history() {
  const std::optional<std::string> history = describe_run_history(spec_.run_dir);
  if (!history) return;
  if (!opt_.overwrite_run) throw InputError(run_history_refusal(spec_.run_dir, *history));
  const fs::path moved = move_run_aside(spec_.run_dir);
  spdlog::info("--overwrite: the previous run in run_dir ({}) was moved to {}", *history,
               moved.string());
}

void Launcher::restore_previous_config() {
  if (!previous_config_) return;
  try {
    write_file_atomically(spec_.run_dir / "config.resolved.yaml", *previous_config_, node_);
  } catch (const std::exception& e) {
    spdlog::warn("could not put back the previous config.resolved.yaml: {}", e.what());
  }
}

void Launcher::choose_node_addr() {
  if (opt_.node_addr) {
    node_addr_ = *opt_.node_addr;
  } else if (nnodes_ == 1) {
    node_addr_ = "127.0.0.1";
  } else {
    node_addr_ = local_address_towards(opt_.cluster.master_addr, opt_.cluster.master_port);
  }
}

int Launcher::preempted_before_start(int sig) {
  spdlog::warn("received {} before the workers started: stopping", signal_name(sig));
  return kExitPreempted;
}

bool Launcher::connect_store() {
  StoreClientOptions client_options;
  client_options.timeout = rendezvous_timeout_;
  if (node_ != 0) return connect_to_node0_store(client_options);

  token_ = opt_.token ? *opt_.token : generate_token();
  write_token_file(token_file_path(spec_.run_dir), token_);
  server_ = std::make_unique<TcpStoreServer>(token_, opt_.cluster.master_port);
  store_addr_ = "127.0.0.1";
  client_options.connect_timeout = std::chrono::seconds(10);
  store_ = std::make_shared<TcpStoreClient>(store_addr_, server_->port(), token_, client_options);
  if (nnodes_ > 1) {
    spdlog::info("rendezvous store listening on port {} for {} nodes", server_->port(), nnodes_);
  }
  return true;
}

bool Launcher::connect_to_node0_store(StoreClientOptions& client_options) {
  // Node 0 may start later, and a token file in a reused run_dir may be the previous
  // run's until node 0 replaces it, so keep trying until the deadline.
  const ClusterPlacement& c = opt_.cluster;
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

}  // namespace trainctl::launch::detail
