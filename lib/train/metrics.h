#pragma once
// What a run reports: metrics.jsonl (one JSON object per logged step, for tools) and a
// live progress line on the console (for people). Only global rank 0 reports.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

namespace trainctl::train {

struct StepMetrics {
  int64_t step = 0;  // 1-based: the number of optimizer steps done
  int64_t total_steps = 0;
  double loss = 0.0;
  double lr = 0.0;
  double grad_norm = 0.0;
  double tokens_per_s = 0.0;
  double step_ms = 0.0;
  std::optional<double> val_loss;
  // Data-parallel communication this step (absent with one DP rank), minima over the DP
  // ranks: time in collectives, and the part the training thread of the last rank to
  // finish its backward pass waited for (not hidden behind the backward pass). The
  // maximum wait also counts earlier ranks waiting for that one (load imbalance).
  std::optional<double> comm_ms;
  std::optional<double> exposed_comm_ms;
  std::optional<double> dp_wait_max_ms;
  // Pipeline parallelism: each pipeline stage's time waiting for its neighbours this step
  // (stage 0 first; measured on the stage's DP 0 / TP 0 rank), and that time as a share of
  // the step (the measured bubble, comparable to `trainctl plan`'s).
  std::vector<double> pipeline_idle_ms;
  std::optional<double> pipeline_bubble;
  double optimizer_state_mb = 0.0;  // this rank's optimizer state (falls by ~dp with ZeRO)
  // fp16 only: the loss scale this step's gradients carried, and whether they overflowed
  // (the update was skipped and the scale halved).
  std::optional<double> loss_scale;
  bool skipped = false;
  // device: cuda: the peak of rank 0's caching allocator so far, in MiB.
  std::optional<double> device_mem_peak_mb;
  double elapsed_s = 0.0;
};

class MetricsReporter {
 public:
  // console_fd < 0: no console output. metrics_path empty: no file.
  MetricsReporter(const std::filesystem::path& metrics_path, int console_fd);
  ~MetricsReporter();
  MetricsReporter(const MetricsReporter&) = delete;
  MetricsReporter& operator=(const MetricsReporter&) = delete;

  void log(const StepMetrics& m);         // a line in metrics.jsonl + a console line
  void progress(const StepMetrics& m);    // console only; overwritten in place on a TTY
  void message(const std::string& line);  // a console line (ends any progress line)

 private:
  void write_console(const std::string& s);
  std::string format(const StepMetrics& m) const;

  std::ofstream file_;
  int fd_ = -1;
  bool tty_ = false;
  bool open_line_ = false;
};

}  // namespace trainctl::train
