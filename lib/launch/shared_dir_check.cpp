#include "launch/shared_dir_check.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <thread>
#include <vector>

#include "launch/job_token.h"
#include "launch/node_files_report.h"
#include "util/error.h"

namespace trainctl::launch {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr const char* kPrefix = "startup/";
constexpr const char* kVerdictOk = "ok";
constexpr const char* kVerdictFailed = "failed:";
constexpr milliseconds kRetry{100};
// How long node 0 keeps the store's verdict available for the others before it exits.
constexpr milliseconds kVerdictLinger{5000};

fs::path check_file(const fs::path& run_dir) { return run_dir / ".shared_dir_check"; }

fs::path node_file(const fs::path& run_dir, int node) {
  return run_dir / (".shared_dir_check.node" + std::to_string(node));
}

// Written whole under a temporary name and renamed, so a reader on another node sees
// either no file or the complete nonce. Returns an error text, empty on success.
std::string write_nonce(const fs::path& file, const std::string& nonce, int node) {
  fs::path tmp = file;
  tmp += ".tmp." + std::to_string(node) + "." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << nonce << "\n";
    if (!out.flush()) return "cannot write " + tmp.string() + " (" + std::strerror(errno) + ")";
  }
  std::error_code ec;
  fs::rename(tmp, file, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return "cannot write " + file.string() + " (" + ec.message() + ")";
  }
  return "";
}

// Empty when `file` holds `nonce`; else what this node sees there. Retries for `grace`:
// a network file system may show a file written on another node a moment later.
std::string read_nonce(const fs::path& file, const std::string& nonce, milliseconds grace) {
  const auto deadline = Clock::now() + grace;
  for (;;) {
    std::string problem;
    std::ifstream in(file);
    std::string line;
    if (!in) {
      problem = "cannot see " + file.string() + " (" + std::strerror(errno) + ")";
    } else if (!std::getline(in, line) || line != nonce) {
      problem = "finds another check's " + file.string() +
                " there (a different directory at the same path)";
    }
    if (problem.empty() || Clock::now() >= deadline) return problem;
    std::this_thread::sleep_for(kRetry);
  }
}

NodeFilesReport own_report(const config::JobSpec& spec, const std::string& resolved_spec_text,
                           const SharedFilesCheckOptions& opt) {
  NodeFilesReport r;
  r.node = opt.node;
  r.host = opt.host;
  // A blend's sources (no data.path) are checked by each node's own pre-launch check.
  if (!spec.data.path.empty()) r.data = file_fingerprint(spec.data.path);
  r.spec_hash = text_hash(resolved_spec_text);
  return r;
}

fs::path data_path(const config::JobSpec& spec) {
  return spec.data.path;  // empty for synthetic data and blends
}

[[noreturn]] void fail_with(const std::string& verdict) { throw InputError(verdict); }

void run_node0(TcpStoreClient& store, const config::JobSpec& spec, const std::string& spec_text,
               const SharedFilesCheckOptions& opt) {
  const std::string prefix = kPrefix;
  const std::string nonce = generate_token();
  const std::string error = write_nonce(check_file(spec.run_dir), nonce, opt.node);
  if (!error.empty()) throw std::runtime_error(error);
  store.set_string(prefix + "nonce", nonce);

  std::vector<NodeFilesReport> reports{own_report(spec, spec_text, opt)};
  for (int n = 1; n < opt.nnodes; ++n) {
    const std::string key = prefix + "report/" + std::to_string(n);
    NodeFilesReport r;
    try {
      r = decode_report(store.get_string(key, opt.timeout));
    } catch (const std::invalid_argument& e) {
      throw RendezvousError("node " + std::to_string(n) + "'s start-up report: " + e.what());
    }
    // The node read node 0's file; now node 0 reads the node's, so writes from that node
    // are proven visible here too.
    if (r.run_dir_problem.empty()) {
      std::string back = read_nonce(node_file(spec.run_dir, n), nonce, opt.fs_grace);
      if (!back.empty()) {
        r.run_dir_problem = "wrote its check file where node 0 " + back;
      }
    }
    reports.push_back(std::move(r));
  }
  std::error_code ec;
  fs::remove(check_file(spec.run_dir), ec);
  for (int n = 1; n < opt.nnodes; ++n) fs::remove(node_file(spec.run_dir, n), ec);

  const std::optional<std::string> verdict =
      shared_files_verdict(reports, spec.run_dir, data_path(spec));
  store.set_string(prefix + "verdict", verdict ? kVerdictFailed + *verdict : kVerdictOk);
  if (!verdict) return;
  // Keep the store up until every node has read why the job stops (or a short while).
  const auto deadline = Clock::now() + kVerdictLinger;
  while (store.add(prefix + "verdict_read", 0) < opt.nnodes - 1 && Clock::now() < deadline) {
    std::this_thread::sleep_for(kRetry);
  }
  fail_with(*verdict);
}

void run_other_node(TcpStoreClient& store, const config::JobSpec& spec,
                    const std::string& spec_text, const SharedFilesCheckOptions& opt) {
  const std::string prefix = kPrefix;
  const std::string nonce = store.get_string(prefix + "nonce", opt.timeout);
  NodeFilesReport r = own_report(spec, spec_text, opt);
  r.run_dir_problem = read_nonce(check_file(spec.run_dir), nonce, opt.fs_grace);
  if (r.run_dir_problem.empty()) {
    const std::string error = write_nonce(node_file(spec.run_dir, opt.node), nonce, opt.node);
    if (!error.empty()) r.run_dir_problem = error;
  }
  store.set_string(prefix + "report/" + std::to_string(opt.node), encode_report(r));
  const std::string verdict = store.get_string(prefix + "verdict", opt.timeout);
  store.add(prefix + "verdict_read", 1);
  if (verdict == kVerdictOk) return;
  if (verdict.rfind(kVerdictFailed, 0) == 0) fail_with(verdict.substr(std::strlen(kVerdictFailed)));
  throw RendezvousError("unexpected start-up verdict from node 0: " + verdict);
}

}  // namespace

void check_nodes_share_files(TcpStoreClient& store, const config::JobSpec& spec,
                             const std::string& resolved_spec_text,
                             const SharedFilesCheckOptions& options) {
  if (options.nnodes <= 1) return;
  const auto start = Clock::now();
  if (options.node == 0) {
    run_node0(store, spec, resolved_spec_text, options);
  } else {
    run_other_node(store, spec, resolved_spec_text, options);
  }
  spdlog::info("all {} nodes see run_dir {}{} and the same job spec ({} ms)", options.nnodes,
               spec.run_dir.string(),
               spec.data.path.empty() ? "" : ", the same " + spec.data.path.string(),
               std::chrono::duration_cast<milliseconds>(Clock::now() - start).count());
}

}  // namespace trainctl::launch
