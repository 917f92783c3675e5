#include "mlflow_artifacts.h"

#include <cstdio>
#include <exception>

#include "observe/mlflow_client.h"
#include "observe/mlflow_tracker.h"
#include "report_command.h"

namespace trainctl::app {

namespace fs = std::filesystem;

void log_mlflow_artifacts(const config::JobSpec& spec, bool hf_exported) {
  const std::optional<observe::MlflowRunFile> recorded =
      observe::read_mlflow_run_file(spec.run_dir);
  if (!recorded || recorded->tracking_uri != spec.logging.mlflow.tracking_uri) {
    std::fprintf(stderr,
                 "warning: MLflow: no run was opened at %s (the workers' log says why): the "
                 "report is not uploaded\n",
                 spec.logging.mlflow.tracking_uri.c_str());
    return;
  }
  try {
    observe::MlflowClient client(recorded->tracking_uri, std::chrono::seconds(30));
    const observe::MlflowRun run = client.get_run(recorded->run_id);
    const fs::path report = spec.run_dir / "report.html";
    if (fs::is_regular_file(spec.run_dir / "metrics.jsonl")) {
      ReportArgs args;
      args.runs = {spec.run_dir};
      args.out = report;
      cmd_report(args);
      client.upload_artifact(run, report, "report.html");
      client.upload_artifact(run, spec.run_dir / "metrics.jsonl", "metrics.jsonl");
    }
    client.upload_artifact(run, spec.run_dir / "config.resolved.yaml", "config.resolved.yaml");
    if (hf_exported) {
      client.log_batch(run.run_id, 0, 0, {}, {},
                       {{"trainctl.hf_export", fs::absolute(spec.run_dir / "hf").string()}});
    }
    std::fprintf(stderr, "MLflow: report, config and metrics uploaded to run %s at %s\n",
                 run.run_id.c_str(), recorded->tracking_uri.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "warning: MLflow: %s (the run itself is complete)\n", e.what());
  }
}

}  // namespace trainctl::app
