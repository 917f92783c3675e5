// `trainctl ckpt verify`: one checkpoint (a step directory), or every checkpoint of a run
// (a checkpoints/ or run directory), saying which is the newest valid one.
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/commit.h"
#include "checkpoint/errors.h"
#include "checkpoint/reader.h"
#include "ckpt_commands.h"
#include "ckpt_text.h"
#include "util/exit_codes.h"

namespace trainctl::app {

namespace {

namespace fs = std::filesystem;
namespace ck = checkpoint;

struct Verdict {
  std::vector<std::string> problems;  // complete messages; empty: intact
  size_t files = 0, bad_files = 0, incomplete = 0, tensors = 0;
  uint64_t bytes = 0;
  bool unprotected = false;  // format 1: metadata.json without a checksum
};

// Everything about one step directory; `list` prints one line per file.
Verdict verify_one(const fs::path& dir, bool list) {
  Verdict v;
  std::optional<ck::CheckpointReader> reader;
  try {
    reader.emplace(dir);
  } catch (const ck::CheckpointCorrupt& e) {
    v.problems.push_back(e.what());
    return v;
  }
  const ck::CheckpointMetadata& m = reader->metadata();
  v.files = m.files.size();
  v.tensors = reader->tensor_names().size();
  v.unprotected = !ck::metadata_is_protected(m);
  for (const ck::FileCheck& c : reader->check_files()) {
    v.bytes += c.bytes;
    if (list && c.ok) std::printf("  ok   %s (%s)\n", c.file.c_str(), size_text(c.bytes).c_str());
    if (list && !c.ok) std::printf("  BAD  %s\n", c.file.c_str());
    if (!c.ok) {
      ++v.bad_files;
      v.problems.push_back(dir.string() + ": " + c.problem);
    }
  }
  for (std::string& problem : reader->check_coverage()) {
    ++v.incomplete;
    v.problems.push_back(std::move(problem));
  }
  return v;
}

std::string unprotected_note(const fs::path& dir) {
  return "note: " + (dir / ck::kMetadataFile).string() +
         " has no checksum (format 1, written by an older trainctl): an edit to it cannot be "
         "detected\n";
}

int verify_step_dir(const fs::path& dir) {
  std::printf("verifying %s\n", dir.string().c_str());
  const Verdict v = verify_one(dir, true);
  for (const std::string& p : v.problems) std::fprintf(stderr, "error: %s\n", p.c_str());
  if (v.unprotected) std::printf("%s", unprotected_note(dir).c_str());
  if (!v.problems.empty()) {
    if (v.files == 0) {
      std::printf("checkpoint DAMAGED: metadata.json cannot be used\n");
    } else {
      std::printf("checkpoint DAMAGED: %zu of %zu files failed, %zu problems with the tensors\n",
                  v.bad_files, v.files, v.incomplete);
    }
    return kExitBadInput;
  }
  std::printf("checkpoint OK: %zu files, %s, checksums match, %zu tensors complete\n", v.files,
              size_text(v.bytes).c_str(), v.tensors);
  return kExitOk;
}

int verify_run(const fs::path& checkpoints_dir) {
  const std::vector<ck::CheckpointStatus> all =
      ck::scan_checkpoints(checkpoints_dir);  // newest first
  const std::optional<std::string> latest = ck::latest_name(checkpoints_dir);
  std::printf("verifying %zu checkpoints in %s%s\n", all.size(), checkpoints_dir.string().c_str(),
              latest ? (" (latest names " + *latest + ")").c_str() : "");
  size_t damaged = 0;
  std::optional<ck::CheckpointStatus> newest_valid;
  for (const ck::CheckpointStatus& c : all) {
    const std::string name = c.path.filename().string();
    Verdict v;
    if (c.problem.empty()) {
      v = verify_one(c.path, false);
    } else {
      v.problems.push_back(c.problem);
    }
    if (v.problems.empty()) {
      std::printf("  OK       %s: %zu files, %s, %zu tensors complete\n", name.c_str(), v.files,
                  size_text(v.bytes).c_str(), v.tensors);
      if (v.unprotected) std::printf("  %s", unprotected_note(c.path).c_str());
      if (!newest_valid) newest_valid = c;
      continue;
    }
    ++damaged;
    std::printf("  DAMAGED  %s: %s\n", name.c_str(), v.problems.front().c_str());
    for (const std::string& p : v.problems) std::fprintf(stderr, "error: %s\n", p.c_str());
  }
  if (newest_valid) {
    std::printf("newest valid checkpoint: %s (step %lld)%s\n", newest_valid->path.string().c_str(),
                static_cast<long long>(newest_valid->step),
                newest_valid->step == all.front().step ? "" : "; every newer one is damaged");
  } else {
    std::printf("no valid checkpoint\n");
  }
  if (damaged > 0) {
    std::printf("%zu of %zu checkpoints DAMAGED\n", damaged, all.size());
    return kExitBadInput;
  }
  std::printf("all %zu checkpoints OK\n", all.size());
  return kExitOk;
}

}  // namespace

int cmd_ckpt_verify(const fs::path& ckpt) {
  std::error_code ec;
  const std::string name = ckpt.filename().string();
  const bool step_dir = name.rfind("step_", 0) == 0 || fs::exists(ckpt / ck::kMetadataFile, ec);
  if (!step_dir) {
    for (const fs::path& dir : {ckpt, ckpt / "checkpoints"}) {
      if (!ck::scan_checkpoints(dir).empty()) return verify_run(dir);
    }
  }
  // A step directory (one that is missing or unreadable is reported by resolve_checkpoint,
  // exit 2); or no checkpoint at all, which resolve_checkpoint reports too.
  if (!step_dir || fs::status(ckpt, ec).type() != fs::file_type::directory) {
    return verify_step_dir(ck::resolve_checkpoint(ckpt));
  }
  return verify_step_dir(ckpt);
}

}  // namespace trainctl::app
