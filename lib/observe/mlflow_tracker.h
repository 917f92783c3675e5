#pragma once
// logging.mlflow on global rank 0: the run's params (the resolved spec) once, every logged
// metrics line, and the run's status, sent to an MLflow tracking server by a thread of its
// own through a bounded queue. Training never waits on the network: a dead or slow server
// costs warnings (the metrics stay in metrics.jsonl), never a step, and the thread retries.
// One MLflow run per run directory: its id is kept in run_dir/mlflow.json, so a resumed or
// restarted run logs on into the same MLflow run.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "observe/mlflow_client.h"

namespace trainctl::observe {

struct MlflowSettings {
  std::string tracking_uri;  // http(s)://host:port
  std::string experiment;
  std::string run_name;
  std::chrono::milliseconds request_timeout{5000};
  std::chrono::milliseconds retry_every{5000};  // after a failed request
  std::chrono::milliseconds flush_limit{5000};  // at the end: what is left is dropped
};

// run_dir/mlflow.json: the MLflow run this run directory logs to.
struct MlflowRunFile {
  std::string tracking_uri, experiment_id, run_id;
};
std::optional<MlflowRunFile> read_mlflow_run_file(const std::filesystem::path& run_dir);
void write_mlflow_run_file(const std::filesystem::path& run_dir, const MlflowRunFile& f);

class MlflowTracker {
 public:
  // Starts the thread; connects in the background. `first_step`: this launch's first step.
  MlflowTracker(MlflowSettings settings, std::filesystem::path run_dir, std::string resolved_yaml,
                int64_t first_step);
  // Sends what is queued (for at most flush_limit) and the run's status: FINISHED after
  // finished(), else KILLED (stopped, preempted or failed; a resume sets RUNNING again).
  ~MlflowTracker();
  MlflowTracker(const MlflowTracker&) = delete;
  MlflowTracker& operator=(const MlflowTracker&) = delete;

  void log(int64_t step, Scalars scalars);  // queues; never blocks on the network
  void finished();

 private:
  struct Line {
    int64_t step;
    int64_t time_ms;
    Scalars scalars;
  };
  void loop();
  bool open_run(MlflowClient& client);
  bool send_queued(MlflowClient& client);
  void warn(const std::string& what);

  MlflowSettings settings_;
  std::filesystem::path run_dir_;
  std::string resolved_yaml_;
  int64_t first_step_;
  std::optional<MlflowRun> run_;

  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Line> queue_;
  size_t dropped_ = 0;
  bool stop_ = false, finished_ = false;
  std::string last_warning_;
  std::thread thread_;
};

}  // namespace trainctl::observe
