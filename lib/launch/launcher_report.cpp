// What the user reads when an attempt fails: the failing rank (or the report its hang
// watchdog left), the tail of its log, a full disk; and after a stop, what to resume from.
#include <spdlog/spdlog.h>

#include <cstdio>
#include <fstream>

#include "launch/launcher_parts.h"
#include "launch/prefixed_store.h"
#include "launch/watchdog.h"
#include "util/error.h"

namespace trainctl::launch::detail {
namespace {

namespace fs = std::filesystem;

// A hint when the file system holding `dir` has (next to) no space left: a worker that
// failed then often could not even write its log.
std::string full_disk_hint(const fs::path& dir) {
  std::error_code ec;
  const fs::space_info space = fs::space(dir, ec);
  if (ec || space.available >= (1u << 20)) return "";
  return "the file system holding " + dir.string() + " has " + std::to_string(space.available) +
         " bytes free: free space there, then resume (--resume auto)";
}

}  // namespace

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
    // A node that stopped responding is why that rank waited in vain: say it first.
    if (!r.lost_nodes.empty()) spdlog::error("{}; then:", r.lost_nodes);
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

}  // namespace trainctl::launch::detail
