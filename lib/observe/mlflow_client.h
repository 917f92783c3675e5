#pragma once
// MLflow's REST API (api/2.0/mlflow/...), the calls a training run needs: find or create
// the experiment, create or look up a run, log params/metrics/tags in batches, set the
// run's status, and upload an artifact through the tracking server's artifact proxy
// (`mlflow server` serves artifacts by default since 2.0). Every call throws
// std::runtime_error naming the endpoint and the server's answer; the caller
// (observe/mlflow_tracker.h) decides that a failure is a warning.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "observe/http_client.h"
#include "observe/tb_event.h"

namespace trainctl::observe {

struct MlflowRun {
  std::string experiment_id;
  std::string run_id;
  std::string artifact_uri;  // "mlflow-artifacts:/<experiment>/<run>/artifacts" when proxied
  std::string status;        // RUNNING | FINISHED | FAILED | KILLED | SCHEDULED
};

using KeyValues = std::vector<std::pair<std::string, std::string>>;

class MlflowClient {
 public:
  MlflowClient(std::string tracking_uri, std::chrono::milliseconds timeout);

  // The id of the experiment called `name`, created when absent.
  std::string experiment_id(const std::string& name);
  MlflowRun create_run(const std::string& experiment_id, const std::string& run_name,
                       int64_t start_ms, const KeyValues& tags);
  MlflowRun get_run(const std::string& run_id);
  // At most 1000 metrics, 100 params and 100 tags per call (MLflow's limits).
  void log_batch(const std::string& run_id, int64_t step, int64_t time_ms, const Scalars& metrics,
                 const KeyValues& params = {}, const KeyValues& tags = {});
  // status RUNNING clears no end time; the others set end_ms.
  void set_status(const std::string& run_id, const std::string& status, int64_t end_ms);
  // Uploads `file` as artifact `name` of the run (a server started with artifact serving).
  void upload_artifact(const MlflowRun& run, const std::filesystem::path& file,
                       const std::string& name);

  const std::string& tracking_uri() const { return uri_; }

 private:
  std::string call(const std::string& method, const std::string& endpoint, const std::string& body);

  std::string uri_;
  HttpClient http_;
};

// The resolved spec's values as MLflow params: "model.n_layer" -> "2", one per leaf of the
// YAML (lists as their flow text), values cut to MLflow's 500 characters.
KeyValues spec_params(const std::string& resolved_yaml);

}  // namespace trainctl::observe
