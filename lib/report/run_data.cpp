#include "report/run_data.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "config/load.h"
#include "model/model_config.h"
#include "util/error.h"

namespace trainctl::report {

namespace {

namespace fs = std::filesystem;

MetricsRow row_of(const nlohmann::json& j) {
  MetricsRow row;
  row.step = j.at("step").get<int64_t>();
  for (const auto& [key, value] : j.items()) {
    if (key == "step") continue;
    if (value.is_number()) {
      row.values[key] = value.get<double>();
    } else if (value.is_boolean()) {
      row.values[key] = value.get<bool>() ? 1.0 : 0.0;
    } else if (value.is_array()) {
      for (size_t i = 0; i < value.size(); ++i) {
        if (value[i].is_number())
          row.values[key + "/" + std::to_string(i)] = value[i].get<double>();
      }
    }
  }
  return row;
}

std::vector<MetricsRow> read_metrics(const fs::path& path, std::vector<std::string>& notes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path.string() + ": cannot be read");
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  std::map<int64_t, MetricsRow> by_step;  // a later line of a step (after a resume) wins
  size_t begin = 0;
  int line_no = 0;
  while (begin < text.size()) {
    const size_t end = text.find('\n', begin);
    ++line_no;
    const bool complete = end != std::string::npos;
    const std::string line = text.substr(begin, complete ? end - begin : std::string::npos);
    begin = complete ? end + 1 : text.size();
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      const auto j = nlohmann::json::parse(line);
      if (!j.is_object() || !j.contains("step") || !j["step"].is_number_integer()) {
        throw std::runtime_error("not a metrics object with an integer \"step\"");
      }
      MetricsRow row = row_of(j);
      by_step[row.step] = std::move(row);
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
  std::vector<MetricsRow> rows;
  for (auto& [step, row] : by_step) rows.push_back(std::move(row));
  return rows;
}

}  // namespace

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
  run.rows = read_metrics(metrics, run.notes);
  if (run.rows.empty()) {
    throw InputError(metrics.string() +
                     ": no metrics yet (no complete line); the run has not logged its first step");
  }
  if (fs::is_regular_file(dir / "trace.json", ec)) run.trace = dir / "trace.json";
  return run;
}

}  // namespace trainctl::report
