#pragma once
// What `trainctl report` reads from a run directory: metrics.jsonl (one row per logged
// step; when a resume logged a step again, the later line wins, as in TensorBoard; read
// line by line into columns, so a long run's file costs a number per value), the
// resolved spec when it can be read (name, layout, model FLOPs per token), and trace.json's
// path when a profiled run left one.
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "util/layout.h"

namespace trainctl::report {

// metrics.jsonl as columns: row i is the i-th logged step, in ascending step order.
struct MetricsTable {
  std::vector<int64_t> steps;
  // Every number of the lines (booleans as 0/1, lists as "key/i", lists of lists as
  // "key/i/k"), one per row: NaN where
  // that row's line lacks the key.
  std::map<std::string, std::vector<double>> columns;

  size_t size() const { return steps.size(); }
  bool has(const std::string& key) const { return columns.count(key) > 0; }
  // NaN when the key is absent from the row (or from every row).
  double value(const std::string& key, size_t row) const;
};

struct RunData {
  std::filesystem::path dir;
  std::string name;      // the spec's name, else the directory's
  MetricsTable metrics;  // by step, each step once; at least one row
  std::optional<Layout> layout;
  int64_t tokens_per_step = 0;                 // 0: unknown (no readable config.resolved.yaml)
  double flops_per_token = 0.0;                // model FLOPs per token (PaLM), 0 when unknown
  std::string device;                          // "cpu" / "cuda" ("" when unknown)
  std::optional<std::filesystem::path> trace;  // run_dir/trace.json when present
  std::vector<std::string> notes;              // what was skipped, for the page
};

// Throws InputError (exit 2) when `dir` is not a run directory (no metrics.jsonl nor
// config.resolved.yaml) or has no complete metrics line yet, naming the path. A last line
// without its newline (a run still writing it) is skipped; another line that is not a JSON
// object with a numeric "step" is an InputError naming file and line.
RunData load_run(const std::filesystem::path& dir);

}  // namespace trainctl::report
