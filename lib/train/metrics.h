#pragma once
// What a run reports: metrics.jsonl (one JSON object per logged step, for tools) and a
// live progress line on the console (for people). Only global rank 0 reports.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "train/jsonl_file.h"
#include "train/step_window.h"

namespace trainctl::train {

struct StepMetrics {
  int64_t step = 0;  // 1-based: the number of optimizer steps done
  int64_t total_steps = 0;
  double loss = 0.0;
  double lr = 0.0;
  double grad_norm = 0.0;
  // Every per-step figure of a logged line is a mean per step over its window: the steps
  // since the previous logged line, this one included (train/step_window.h); a total
  // over the window says so in its name (comm_bytes_window). docs/observability.md has
  // the table. tokens_per_s: the window's tokens over its wall-clock time.
  double tokens_per_s = 0.0;
  double step_ms = 0.0;
  std::optional<double> val_loss;
  // A blend's sources' validation losses (name, loss): metrics "val_loss/<name>".
  std::vector<std::pair<std::string, double>> source_val_losses;
  // Data-parallel communication per step (absent with one DP rank), minima over the DP
  // ranks: time in collectives, and the part the training thread of the last rank to
  // finish its backward pass waited for (not hidden behind the backward pass). The
  // maximum wait also counts earlier ranks waiting for that one (load imbalance).
  std::optional<double> comm_ms;
  std::optional<double> exposed_comm_ms;
  std::optional<double> dp_wait_max_ms;
  // Bytes this rank sent for the gradient/parameter exchange over dp
  // (parallel/comm_stats.h's ring model; 0 with one DP rank), per step and in the whole
  // window: under local_sgd/diloco a window with one synchronisation in 4 steps shows a
  // quarter of it per step. Parameter servers: what worker 0 pushed, per global step.
  int64_t comm_bytes = 0;
  int64_t comm_bytes_window = 0;
  // Pipeline parallelism: each pipeline stage's time waiting for its neighbours per step
  // (stage 0 first; measured on the stage's DP 0 / TP 0 rank), and that time as a share of
  // step_ms (the measured bubble, comparable to `trainctl plan`'s).
  std::vector<double> pipeline_idle_ms;
  std::optional<double> pipeline_bubble;
  // Context parallelism (cp > 1): this rank's ring-attention K/V traffic in the step (time
  // the CP ring's thread spent exchanging) and the part attention waited for, not hidden
  // behind its compute (comm/ring_exchange.h).
  std::optional<double> cp_ring_ms;
  std::optional<double> cp_ring_exposed_ms;
  double optimizer_state_mb = 0.0;  // this rank's optimizer state (falls by ~dp with ZeRO)
  // fp16 only: the loss scale this step's gradients carried, and whether they overflowed
  // (the update was skipped and the scale halved).
  std::optional<double> loss_scale;
  bool skipped = false;
  // Memory, in MiB. mem_peak_mb: the peak of this rank's tensor allocator so far (every
  // buffer from Backend::alloc: weights, gradients, optimizer state, activations,
  // communication staging; on CUDA the caching allocator's peak), the quantity `trainctl
  // plan` estimates. On logged steps, mem_peak_mb_ranks: every world rank's (index = rank)
  // and mem_peak_mb_max their maximum. mem_rss_peak_mb: this process's peak resident set
  // (VmHWM: also code, libraries, heap outside the allocator, communication library buffers).
  double mem_peak_mb = 0.0;
  std::optional<double> mem_peak_mb_max;
  std::vector<double> mem_peak_mb_ranks;
  std::optional<double> mem_rss_peak_mb;
  // device: cuda: the peak of rank 0's caching allocator so far, in MiB (= mem_peak_mb;
  // kept under its earlier name).
  std::optional<double> device_mem_peak_mb;
  double elapsed_s = 0.0;
  // parallel.mode: parameter_server (lib/ps/): server 0's version (updates applied), the
  // gradients it applied since the previous logged line, and each one's staleness (the
  // updates between the parameters it was computed on and the one applying it) as a
  // histogram, index = staleness, 0..max_staleness.
  std::optional<int64_t> ps_version;
  std::optional<int64_t> ps_gradients;
  std::vector<int64_t> ps_staleness;
  std::optional<int64_t> ps_staleness_max;
  // runtime.fault_tolerance: the live replicas whose micro-batches this step trained on
  // (docs/fault-tolerance.md); absent without fault tolerance.
  std::optional<int> replicas;
  // Mixture-of-experts models (train/moe_balance.h), logged steps only, means over the
  // window: the auxiliary balancing loss added to the objective (balance: aux_loss), each
  // layer's load imbalance (max routed tokens per expert / the mean; index = layer, nullopt
  // for a dense layer) and its experts' shares of the routed load, and the fraction of
  // routed assignments the capacity dropped (0 when dropless).
  std::optional<double> moe_aux_loss;
  std::vector<std::optional<double>> moe_load_imbalance;
  std::vector<std::vector<double>> moe_expert_load;
  std::optional<double> moe_dropped_fraction;
};

// The wall-clock side of the metrics: the current step's time, the time since the start,
// tokens per second over the steps since the last logged one, and those steps' figures
// (window(): what measure_step adds as each step finishes).
class StepTimer {
 public:
  using Clock = std::chrono::steady_clock;
  StepTimer();
  void begin_step();
  double step_ms() const;
  double elapsed_s() const;
  double tokens_per_s(int64_t tokens_per_step) const;  // since restart_window()
  StepWindow& window() { return window_; }
  const StepWindow& window() const { return window_; }
  void restart_window();  // on a logged step, after its line

 private:
  Clock::time_point start_, window_start_, step_start_;
  int64_t window_steps_ = 0;
  StepWindow window_;
};

// A step's line of metrics.jsonl.
nlohmann::ordered_json metrics_json(const StepMetrics& m);

class MetricsReporter {
 public:
  // console_fd < 0: no console output. metrics_path empty: no file. log_every_steps:
  // logging.every_steps.
  MetricsReporter(const std::filesystem::path& metrics_path, int console_fd, int log_every_steps);
  ~MetricsReporter();
  MetricsReporter(const MetricsReporter&) = delete;
  MetricsReporter& operator=(const MetricsReporter&) = delete;

  // Whether `step` (1-based) is logged: every log_every_steps steps, the first, the last
  // (`last`: the end of training or a stop) and a skipped one (`skipped`: fp16 overflow).
  // The same on every rank, which gather the logged steps' statistics together.
  bool should_log(int64_t step, bool last, bool skipped) const;
  void log(const StepMetrics& m);  // a line in metrics.jsonl + a console line
  // A line made earlier (metrics_json), to metrics.jsonl and the sinks only: the
  // fault-tolerant loop's new primary writes the lines a dead one could not.
  void append(const nlohmann::ordered_json& line);
  void progress(const StepMetrics& m);    // console only; overwritten in place on a TTY
  void message(const std::string& line);  // a console line (ends any progress line)
  // The run continues after `step` completed steps (0: from scratch): drops the lines of
  // later steps a stopped or crashed run had logged, which are about to be trained again,
  // so metrics.jsonl shows each step once. Returns how many were dropped.
  size_t continue_after(int64_t step) { return file_.keep_steps_through(step); }
  // Bytes of a torn last line (an earlier process died mid-write) cut off at the start.
  size_t repaired_bytes() const { return file_.repaired_bytes(); }
  // Also hands every line written to metrics.jsonl to `sink` (e.g. TensorBoard).
  void add_sink(std::function<void(const nlohmann::ordered_json&)> sink);

 private:
  void write_console(const std::string& s);
  std::string format(const StepMetrics& m) const;

  JsonLinesFile file_;
  std::vector<std::function<void(const nlohmann::ordered_json&)>> sinks_;
  int fd_ = -1;
  int log_every_ = 1;
  bool tty_ = false;
  bool open_line_ = false;
};

}  // namespace trainctl::train
