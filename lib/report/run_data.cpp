#include "report/run_data.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>

#include "config/load.h"
#include "model/model_config.h"
#include "util/error.h"

namespace trainctl::report {

namespace {

namespace fs = std::filesystem;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Appends one line's numbers as the table's next row (its columns catch up with NaN where
// earlier lines lacked their key; `finish` pads the rest).
// `expected_rows`: room each new column reserves, so a long file's columns do not
// reallocate (each doubling would hold old and new arrays at once).
void append_row(MetricsTable& t, const nlohmann::json& j, size_t expected_rows) {
  const size_t row = t.steps.size();
  auto put = [&](const std::string& key, double v) {
    std::vector<double>& column = t.columns[key];
    if (column.capacity() == 0) column.reserve(expected_rows);
    column.resize(row, kNaN);
    column.push_back(v);
  };
  for (const auto& [key, value] : j.items()) {
    if (key == "step") continue;
    if (value.is_number()) {
      put(key, value.get<double>());
    } else if (value.is_boolean()) {
      put(key, value.get<bool>() ? 1.0 : 0.0);
    } else if (value.is_array()) {
      for (size_t i = 0; i < value.size(); ++i) {
        const std::string at = key + "/" + std::to_string(i);
        if (value[i].is_number()) put(at, value[i].get<double>());
        if (!value[i].is_array()) continue;  // a list of lists (moe_expert_load): "key/i/k"
        for (size_t k = 0; k < value[i].size(); ++k) {
          if (value[i][k].is_number()) put(at + "/" + std::to_string(k), value[i][k].get<double>());
        }
      }
    }
  }
  t.steps.push_back(j["step"].get<int64_t>());
}

// Every column as long as the table; rows by ascending step, and of the lines of one step
// (a resume logged it again) only the last.
void finish(MetricsTable& t) {
  for (auto& [key, column] : t.columns) column.resize(t.steps.size(), kNaN);
  if (std::adjacent_find(t.steps.begin(), t.steps.end(), std::greater_equal<>()) == t.steps.end()) {
    return;  // already strictly ascending: the usual file
  }
  std::vector<size_t> order(t.steps.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return t.steps[a] < t.steps[b]; });
  std::vector<size_t> kept;
  for (size_t i = 0; i < order.size(); ++i) {
    if (i + 1 < order.size() && t.steps[order[i + 1]] == t.steps[order[i]]) continue;
    kept.push_back(order[i]);
  }
  auto gather = [&](auto& v) {
    std::remove_reference_t<decltype(v)> out;
    out.reserve(kept.size());
    for (size_t i : kept) out.push_back(v[i]);
    v = std::move(out);
  };
  gather(t.steps);
  for (auto& [key, column] : t.columns) gather(column);
  // A key only the replaced lines had is not in the run's metrics any more.
  std::erase_if(t.columns, [](const auto& kv) {
    return std::none_of(kv.second.begin(), kv.second.end(),
                        [](double v) { return !std::isnan(v); });
  });
}

MetricsTable read_metrics(const fs::path& path, std::vector<std::string>& notes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path.string() + ": cannot be read");
  MetricsTable table;
  std::error_code ec;
  const uintmax_t bytes = fs::file_size(path, ec);
  size_t expected_rows = 0;  // from the first line's length: the lines are alike
  std::string line;
  int64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    const bool complete = !in.eof();  // getline stops at the end of the file without '\n'
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (expected_rows == 0) {
      expected_rows = ec ? 1 : static_cast<size_t>(bytes / (line.size() + 1) * 11 / 10 + 16);
      table.steps.reserve(expected_rows);
    }
    try {
      const auto j = nlohmann::json::parse(line);
      if (!j.is_object() || !j.contains("step") || !j["step"].is_number_integer()) {
        throw std::runtime_error("not a metrics object with an integer \"step\"");
      }
      append_row(table, j, expected_rows);
    } catch (const std::exception& e) {
      if (!complete) {  // the run is still writing this line
        notes.push_back(path.string() + ": skipped the unfinished last line " +
                        std::to_string(line_no));
        break;
      }
      throw InputError(path.string() + ":" + std::to_string(line_no) + ": not a metrics line (" +
                       e.what() + "); metrics.jsonl holds one JSON object per logged step");
    }
  }
  finish(table);
  return table;
}

}  // namespace

double MetricsTable::value(const std::string& key, size_t row) const {
  const auto it = columns.find(key);
  return it == columns.end() ? kNaN : it->second[row];
}

RunData load_run(const fs::path& dir) {
  RunData run;
  run.dir = dir;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw InputError(dir.string() + ": not a directory; give a run directory (run_dir of a job)");
  }
  const fs::path metrics = dir / "metrics.jsonl", config = dir / "config.resolved.yaml";
  const bool has_metrics = fs::is_regular_file(metrics, ec),
             has_config = fs::is_regular_file(config, ec);
  if (!has_metrics && !has_config) {
    throw InputError(dir.string() +
                     ": not a run directory (no metrics.jsonl or config.resolved.yaml); give "
                     "the run_dir of a job trainctl train ran");
  }
  fs::path normal = fs::absolute(dir).lexically_normal();
  if (normal.filename().empty()) normal = normal.parent_path();  // "runs/x/" names x
  run.name = normal.filename().string();
  if (has_config) {
    try {
      const config::JobSpec spec = config::load_job_spec(config);
      run.name = spec.name;
      run.layout = Layout{spec.parallel.dp, spec.parallel.tp, spec.parallel.pp};
      run.tokens_per_step =
          static_cast<int64_t>(spec.training.global_batch_size) * spec.model.seq_len;
      model::ModelConfig cfg{spec.model.vocab_size, spec.model.seq_len, spec.model.n_layer,
                             spec.model.n_head, spec.model.d_model};
      if (spec.model.is_llama()) {
        cfg.family = model::Family::llama;
        cfg.n_kv_head = spec.model.kv_heads();
        cfg.ffn_hidden = spec.model.mlp_hidden();
        cfg.tie_embeddings = spec.model.tie_embeddings;
      }
      run.flops_per_token = cfg.flops_per_token(spec.model.seq_len);
      run.device = config::to_string(spec.device);
    } catch (const std::exception& e) {
      run.notes.push_back(config.string() + " not used: " + e.what());
    }
  }
  if (!has_metrics) {
    throw InputError(dir.string() +
                     ": no metrics yet (metrics.jsonl is missing); the run has "
                     "not logged its first step");
  }
  run.metrics = read_metrics(metrics, run.notes);
  if (run.metrics.size() == 0) {
    throw InputError(metrics.string() +
                     ": no metrics yet (no complete line); the run has not logged its first step");
  }
  if (fs::is_regular_file(dir / "trace.json", ec)) run.trace = dir / "trace.json";
  return run;
}

}  // namespace trainctl::report
