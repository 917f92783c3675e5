#pragma once
// logging.mlflow, after the workers: node 0 uploads the run's report (report.html, written
// into run_dir), config.resolved.yaml and metrics.jsonl as artifacts of the MLflow run the
// workers logged to (run_dir/mlflow.json), and tags where the Hugging Face export is. A
// server problem is a warning: the run's exit code never depends on MLflow.
#include "config/job_spec.h"

namespace trainctl::app {

void log_mlflow_artifacts(const config::JobSpec& spec, bool hf_exported);

}  // namespace trainctl::app
