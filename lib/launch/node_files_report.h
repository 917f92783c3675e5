#pragma once
// What one node of a multi-node job sees of the files every node must share, and the
// verdict over all nodes' reports (launch/shared_dir_check.h runs the exchange). Pure
// functions, so the messages are unit-tested without processes or a store.
//
// A multi-node job needs, on every node:
//   - the same run_dir: every node's workers write their checkpoint shards, logs and
//     metrics into it, and node 0 commits a checkpoint only when every shard is there;
//   - the same data file (data.path): every worker reads its own batches from it;
//   - the same resolved job spec: the workers read config.resolved.yaml from run_dir.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace trainctl::launch {

// How much of a data file is hashed: enough to tell two different corpora apart without
// reading a multi-GiB file on every node before training.
inline constexpr uint64_t kFingerprintBytes = 1024 * 1024;

struct NodeFilesReport {
  int node = 0;
  std::string host;  // "host h2, 10.77.0.2": how messages name the node
  // Empty when the node read node 0's check file back from run_dir (and wrote its own);
  // else what went wrong as a verb phrase with the node as subject, e.g. "cannot see
  // <file> (No such file or directory)".
  std::string run_dir_problem;
  // The data file's fingerprint (file_fingerprint), or "missing: <why>"; empty when the
  // job has no data file (synthetic data).
  std::string data;
  // A hash of the resolved job spec as this node's launcher loaded it.
  std::string spec_hash;
};

// "<size> bytes, first MiB hash <16 hex digits>" (FNV-1a 64 over the first
// kFingerprintBytes), or "missing: <reason>" when the file cannot be opened or read.
std::string file_fingerprint(const std::filesystem::path& file);

// FNV-1a 64 of `text` as 16 hex digits.
std::string text_hash(const std::string& text);

// One line per field; values have newlines replaced by spaces. decode throws
// std::invalid_argument on a malformed report.
std::string encode_report(const NodeFilesReport& report);
NodeFilesReport decode_report(const std::string& text);

// reports[0] is node 0's (the reference), then one per other node in any order. Returns
// the complete error message when any node disagrees with node 0, naming run_dir (or the
// data file), every node that cannot see it and what to do; nullopt when all agree.
std::optional<std::string> shared_files_verdict(const std::vector<NodeFilesReport>& reports,
                                                const std::filesystem::path& run_dir,
                                                const std::filesystem::path& data_path);

}  // namespace trainctl::launch
