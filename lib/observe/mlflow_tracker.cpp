#include "observe/mlflow_tracker.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>

namespace trainctl::observe {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

constexpr size_t kMaxQueued = 100000;  // logged lines kept while the server is away
constexpr size_t kMaxParamsPerCall = 100;

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

std::optional<MlflowRunFile> read_mlflow_run_file(const fs::path& run_dir) {
  std::ifstream in(run_dir / "mlflow.json");
  if (!in) return std::nullopt;
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (!j.is_object() || !j.contains("run_id")) return std::nullopt;
  return MlflowRunFile{j.value("tracking_uri", ""), j.value("experiment_id", ""),
                       j.value("run_id", "")};
}

void write_mlflow_run_file(const fs::path& run_dir, const MlflowRunFile& f) {
  const fs::path tmp = run_dir / "mlflow.json.tmp";
  std::ofstream(tmp) << nlohmann::json{{"tracking_uri", f.tracking_uri},
                                       {"experiment_id", f.experiment_id},
                                       {"run_id", f.run_id}}
                            .dump(2)
                     << "\n";
  fs::rename(tmp, run_dir / "mlflow.json");
}

MlflowTracker::MlflowTracker(MlflowSettings settings, fs::path run_dir, std::string resolved_yaml,
                             int64_t first_step)
    : settings_(std::move(settings)),
      run_dir_(std::move(run_dir)),
      resolved_yaml_(std::move(resolved_yaml)),
      first_step_(first_step),
      thread_([this] { loop(); }) {}

MlflowTracker::~MlflowTracker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void MlflowTracker::log(int64_t step, Scalars scalars) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (queue_.size() >= kMaxQueued) {
      queue_.pop_front();
      ++dropped_;
    }
    queue_.push_back({step, now_ms(), std::move(scalars)});
  }
  wake_.notify_all();
}

void MlflowTracker::finished() {
  std::lock_guard<std::mutex> lock(mu_);
  finished_ = true;
}

void MlflowTracker::warn(const std::string& what) {
  // Each distinct problem once: a server that stays away is not a warning per step.
  if (what == last_warning_) return;
  last_warning_ = what;
  spdlog::warn("MLflow: {} (training goes on; metrics.jsonl has every value; retrying every {} s)",
               what, settings_.retry_every.count() / 1000.0);
}

// Continues the run recorded in run_dir/mlflow.json when it is on this server, else creates
// one and logs the spec as its params.
bool MlflowTracker::open_run(MlflowClient& client) {
  const std::optional<MlflowRunFile> recorded = read_mlflow_run_file(run_dir_);
  if (recorded && recorded->tracking_uri == client.tracking_uri()) {
    run_ = client.get_run(recorded->run_id);
    client.set_status(run_->run_id, "RUNNING", 0);
    client.log_batch(run_->run_id, first_step_, now_ms(), {}, {},
                     {{"trainctl.resumed_at_step", std::to_string(first_step_)}});
    return true;
  }
  const std::string experiment = client.experiment_id(settings_.experiment);
  run_ = client.create_run(
      experiment, settings_.run_name, now_ms(),
      {{"mlflow.source.name", "trainctl"}, {"trainctl.run_dir", fs::absolute(run_dir_).string()}});
  const KeyValues params = spec_params(resolved_yaml_);
  for (size_t i = 0; i < params.size(); i += kMaxParamsPerCall) {
    const KeyValues part(params.begin() + static_cast<std::ptrdiff_t>(i),
                         params.begin() + static_cast<std::ptrdiff_t>(
                                              std::min(params.size(), i + kMaxParamsPerCall)));
    client.log_batch(run_->run_id, 0, now_ms(), {}, part);
  }
  write_mlflow_run_file(run_dir_, {client.tracking_uri(), run_->experiment_id, run_->run_id});
  spdlog::info("MLflow: logging to run {} of experiment '{}' at {}", run_->run_id,
               settings_.experiment, client.tracking_uri());
  return true;
}

// Sends queued lines, oldest first; false (the line kept) when the server refused one.
bool MlflowTracker::send_queued(MlflowClient& client) {
  for (;;) {
    Line line;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (dropped_ > 0) {
        spdlog::warn("MLflow: {} logged steps were dropped while the server was away", dropped_);
        dropped_ = 0;
      }
      if (queue_.empty()) return true;
      line = queue_.front();
    }
    client.log_batch(run_->run_id, line.step, line.time_ms, line.scalars);
    std::lock_guard<std::mutex> lock(mu_);
    if (!queue_.empty() && queue_.front().step == line.step) queue_.pop_front();
  }
}

void MlflowTracker::loop() {
  MlflowClient client(settings_.tracking_uri, settings_.request_timeout);
  std::optional<Clock::time_point> stop_deadline;
  Clock::time_point next_try = Clock::now();
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      Clock::time_point until = std::max(next_try, Clock::now() + std::chrono::milliseconds(200));
      if (stop_deadline) until = std::min(until, *stop_deadline);
      wake_.wait_until(lock, until, [&] {
        return (stop_ && !stop_deadline) || (!queue_.empty() && Clock::now() >= next_try);
      });
      if (stop_ && !stop_deadline) stop_deadline = Clock::now() + settings_.flush_limit;
    }
    if (stop_deadline && Clock::now() >= *stop_deadline) break;
    if (Clock::now() < next_try) continue;
    try {
      if (!run_) open_run(client);
      send_queued(client);
      if (stop_deadline) break;
    } catch (const std::exception& e) {
      warn(e.what());
      next_try = Clock::now() + settings_.retry_every;
    }
  }
  if (!run_) return;
  try {
    const bool done = [&] {
      std::lock_guard<std::mutex> lock(mu_);
      return finished_;
    }();
    client.set_status(run_->run_id, done ? "FINISHED" : "KILLED", now_ms());
  } catch (const std::exception& e) {
    warn(e.what());
  }
}

}  // namespace trainctl::observe
