#include "checkpoint/commit.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <stdexcept>

#include "checkpoint/durable_file.h"
#include "checkpoint/errors.h"
#include "checkpoint/metadata.h"
#include "util/error.h"
#include "util/storage_error.h"

namespace trainctl::checkpoint {

namespace fs = std::filesystem;

namespace {

constexpr const char* kStepPrefix = "step_";
constexpr const char* kTmpPrefix = ".tmp_";
constexpr const char* kTrashPrefix = ".trash_";

// The step of a directory named step_<digits>, else nullopt.
std::optional<int64_t> step_of(const std::string& name) {
  const std::string prefix = kStepPrefix;
  if (name.rfind(prefix, 0) != 0 || name.size() == prefix.size()) return std::nullopt;
  const std::string digits = name.substr(prefix.size());
  if (digits.size() > 18 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  return std::stoll(digits);
}

// Why `path` (an entry named step_<N>) is not a usable checkpoint; empty when it is.
std::string problem_of(const fs::path& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec) return "cannot read " + path.string() + ": " + ec.message();
  if (st.type() != fs::file_type::directory) return path.string() + " is not a directory";
  try {
    read_metadata(path);
    return {};
  } catch (const std::exception& e) {
    return e.what();
  }
}

void sync_tree(const fs::path& dir) {
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    fsync_file(e.path());
  }
  fsync_directory(dir);
}

}  // namespace

std::string step_dir_name(int64_t step) {
  char text[40];
  std::snprintf(text, sizeof text, "step_%08lld", static_cast<long long>(step));
  return text;
}

fs::path tmp_dir_for(const fs::path& checkpoints_dir, int64_t step) {
  return checkpoints_dir / (kTmpPrefix + step_dir_name(step));
}

std::vector<fs::path> remove_leftovers(const fs::path& checkpoints_dir) {
  std::vector<fs::path> removed;
  if (!fs::is_directory(checkpoints_dir)) return removed;
  for (const fs::directory_entry& e : fs::directory_iterator(checkpoints_dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(kTmpPrefix, 0) == 0 || name.rfind(kTrashPrefix, 0) == 0) {
      fs::remove_all(e.path());
      removed.push_back(e.path());
    }
  }
  return removed;
}

fs::path begin_checkpoint(const fs::path& checkpoints_dir, int64_t step) {
  std::error_code ec;
  fs::create_directories(checkpoints_dir, ec);
  if (ec) throw_write_error(ec.value(), "cannot create", checkpoints_dir);
  remove_leftovers(checkpoints_dir);
  const fs::path tmp = tmp_dir_for(checkpoints_dir, step);
  fs::create_directory(tmp, ec);
  if (ec) throw_write_error(ec.value(), "cannot create", tmp);
  fsync_directory(checkpoints_dir);
  return tmp;
}

fs::path commit_checkpoint(const fs::path& tmp, const fs::path& checkpoints_dir, int64_t step,
                           int keep_last) {
  if (!fs::exists(tmp / kMetadataFile)) {
    throw std::runtime_error("cannot commit " + tmp.string() + ": it has no " + kMetadataFile +
                             " (write it after every rank's shard)");
  }
  sync_tree(tmp);
  const std::string name = step_dir_name(step);
  const fs::path final_dir = checkpoints_dir / name;
  // rename(2) cannot replace a non-empty directory: move an older save of this step aside.
  const fs::path trash = checkpoints_dir / (kTrashPrefix + name);
  if (fs::exists(final_dir)) {
    fs::remove_all(trash);
    fs::rename(final_dir, trash);
  }
  fs::rename(tmp, final_dir);
  fsync_directory(checkpoints_dir);
  write_file_atomically(checkpoints_dir / kLatestFile, name + "\n");
  fs::remove_all(trash);

  if (keep_last > 0) {
    std::vector<CheckpointEntry> others;
    for (CheckpointEntry& e : list_complete(checkpoints_dir)) {
      if (e.path.filename() != name) others.push_back(std::move(e));
    }
    // Newest first; keep keep_last - 1 of them beside the new one.
    std::sort(others.begin(), others.end(),
              [](const CheckpointEntry& a, const CheckpointEntry& b) { return a.step > b.step; });
    for (size_t i = static_cast<size_t>(keep_last) - 1; i < others.size(); ++i) {
      fs::remove_all(others[i].path);
    }
    fsync_directory(checkpoints_dir);
  }
  return final_dir;
}

std::vector<CheckpointStatus> scan_checkpoints(const fs::path& checkpoints_dir) {
  std::vector<CheckpointStatus> out;
  std::error_code ec;
  fs::directory_iterator it(checkpoints_dir, ec);
  // Entries are judged by name and by reading them, never by directory_entry's cached type:
  // its throwing accessors are what turned a symbolic link loop into a raw filesystem error.
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::optional<int64_t> step = step_of(it->path().filename().string());
    if (step) out.push_back({*step, it->path(), problem_of(it->path())});
  }
  std::sort(out.begin(), out.end(),
            [](const CheckpointStatus& a, const CheckpointStatus& b) { return a.step > b.step; });
  return out;
}

std::optional<std::string> latest_name(const fs::path& checkpoints_dir) {
  std::ifstream in(checkpoints_dir / kLatestFile);
  std::string name;
  if (in && std::getline(in, name) && step_of(name)) return name;
  return std::nullopt;
}

std::vector<CheckpointEntry> list_complete(const fs::path& checkpoints_dir) {
  std::vector<CheckpointEntry> out;
  for (const CheckpointStatus& c : scan_checkpoints(checkpoints_dir)) {
    if (c.problem.empty()) out.push_back({c.step, c.path});
  }
  std::reverse(out.begin(), out.end());
  return out;
}

std::optional<fs::path> latest_checkpoint(const fs::path& checkpoints_dir) {
  for (const CheckpointStatus& c : auto_resume_order(checkpoints_dir)) {
    if (c.problem.empty()) return c.path;
  }
  return std::nullopt;
}

std::vector<CheckpointStatus> auto_resume_order(const fs::path& checkpoints_dir) {
  std::vector<CheckpointStatus> all = scan_checkpoints(checkpoints_dir);
  if (const std::optional<std::string> latest = latest_name(checkpoints_dir)) {
    auto named = std::find_if(all.begin(), all.end(), [&](const CheckpointStatus& c) {
      return c.path.filename() == *latest;
    });
    if (named != all.end()) std::rotate(all.begin(), named, named + 1);
  }
  return all;
}

fs::path resolve_checkpoint(const fs::path& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (st.type() == fs::file_type::not_found) {
    throw InputError("checkpoint " + path.string() + " does not exist");
  }
  if (ec) throw InputError("cannot read checkpoint " + path.string() + ": " + ec.message());
  if (st.type() != fs::file_type::directory) {
    throw InputError(path.string() +
                     " is not a checkpoint: give a step directory (checkpoints/step_NNNNNNNN), a "
                     "checkpoints/ directory or a run directory");
  }
  if (step_of(path.filename().string()) || fs::exists(path / kMetadataFile, ec)) {
    read_metadata(path);  // throws CheckpointCorrupt naming what is wrong
    return path;
  }
  for (const fs::path& dir : {path, path / "checkpoints"}) {
    const std::vector<CheckpointStatus> order = auto_resume_order(dir);
    if (order.empty()) continue;
    const CheckpointStatus& chosen = order.front();
    if (chosen.problem.empty()) return chosen.path;
    std::string instead;
    for (const CheckpointStatus& c : order) {
      if (c.problem.empty()) {
        instead = " (the newest usable one is " + c.path.string() + ": give it explicitly)";
        break;
      }
    }
    throw CheckpointCorrupt(chosen.problem + "; it is the latest checkpoint in " + dir.string() +
                            instead);
  }
  throw InputError("no complete checkpoint in " + path.string() +
                   " (looked for metadata.json there, and for step_* directories in it and in "
                   "its checkpoints/)");
}

std::optional<fs::path> resolve_resume(const fs::path& checkpoints_dir, const std::string& resume) {
  if (resume == "none") return std::nullopt;
  if (resume == "auto") return latest_checkpoint(checkpoints_dir);
  return resolve_checkpoint(resume);
}

}  // namespace trainctl::checkpoint
