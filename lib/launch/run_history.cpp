#include "launch/run_history.h"

#include <algorithm>
#include <ctime>
#include <fstream>
#include <system_error>
#include <vector>

#include "launch/run_dir_lock.h"

namespace trainctl::launch {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kPreviousPrefix = "previous-";

bool is_previous_run(const fs::path& entry) {
  return entry.filename().string().rfind(kPreviousPrefix, 0) == 0;
}

size_t line_count(const fs::path& file) {
  std::ifstream in(file);
  return static_cast<size_t>(std::count(std::istreambuf_iterator<char>(in), {}, '\n'));
}

std::vector<std::string> step_directories(const fs::path& checkpoints) {
  std::vector<std::string> steps;
  std::error_code ec;
  for (fs::directory_iterator it(checkpoints, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (it->is_directory() && name.rfind("step_", 0) == 0) steps.push_back(name);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

bool has_event_files(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return false;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().filename().string().rfind("events.out.tfevents.", 0) == 0) return true;
  }
  return false;
}

std::string utc_stamp() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y%m%d-%H%M%S", &tm);
  return text;
}

}  // namespace

std::optional<std::string> describe_run_history(const fs::path& run_dir) {
  std::vector<std::string> parts;
  const std::vector<std::string> steps = step_directories(run_dir / "checkpoints");
  if (!steps.empty()) {
    parts.push_back(std::to_string(steps.size()) + " checkpoint" + (steps.size() > 1 ? "s" : "") +
                    " (newest " + steps.back() + ")");
  }
  std::error_code ec;
  const fs::path metrics = run_dir / "metrics.jsonl";
  if (fs::is_regular_file(metrics, ec) && fs::file_size(metrics, ec) > 0 && !ec) {
    parts.push_back("metrics.jsonl (" + std::to_string(line_count(metrics)) + " lines)");
  }
  if (has_event_files(run_dir / "tb")) parts.push_back("TensorBoard events");
  if (parts.empty()) return std::nullopt;
  std::string text = parts[0];
  for (size_t i = 1; i < parts.size(); ++i)
    text += (i + 1 == parts.size() ? " and " : ", ") + parts[i];
  return text;
}

fs::path move_run_aside(const fs::path& run_dir) {
  const std::string stamp = utc_stamp();
  fs::path target = run_dir / (std::string(kPreviousPrefix) + stamp);
  for (int n = 2; fs::exists(target); ++n) {
    target = run_dir / (std::string(kPreviousPrefix) + stamp + "-" + std::to_string(n));
  }
  fs::create_directory(target);
  const fs::path lock = RunDirLock::file_of(run_dir).filename();
  std::vector<fs::path> entries;
  for (const fs::directory_entry& e : fs::directory_iterator(run_dir)) {
    if (e.path().filename() == lock || is_previous_run(e.path())) continue;
    entries.push_back(e.path());
  }
  // rename(2) within one directory tree: nothing is copied, and a crash leaves every file
  // either in run_dir or in the previous-* folder, never lost.
  for (const fs::path& p : entries) fs::rename(p, target / p.filename());
  return target;
}

std::string run_history_refusal(const fs::path& run_dir, const std::string& history) {
  return "run_dir " + run_dir.string() + " already holds a run: " + history +
         ". --resume none would mix two histories there. Continue it with --resume auto (the "
         "default), give this job another run_dir, or start over with --resume none "
         "--overwrite, which moves the old run to " +
         (run_dir / "previous-<UTC time>").string() + "/ (nothing is deleted)";
}

}  // namespace trainctl::launch
