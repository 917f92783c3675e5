#include "train/metrics.h"

#include <unistd.h>

#include <cmath>
#include <nlohmann/json.hpp>

namespace trainctl::train {

namespace {
std::string hms(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) seconds = 0;
  const auto s = static_cast<long>(seconds + 0.5);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, (s / 60) % 60, s % 60);
  return buf;
}

// A dense layer's entries are null, so an array's index is the model layer.
void add_moe_metrics(const StepMetrics& m, nlohmann::ordered_json& j) {
  if (m.moe_aux_loss) j["moe_aux_loss"] = *m.moe_aux_loss;
  if (!m.moe_load_imbalance.empty()) {
    nlohmann::ordered_json imbalance = nlohmann::ordered_json::array();
    nlohmann::ordered_json load = nlohmann::ordered_json::array();
    for (size_t l = 0; l < m.moe_load_imbalance.size(); ++l) {
      const auto& v = m.moe_load_imbalance[l];
      imbalance.push_back(v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json());
      load.push_back(v ? nlohmann::ordered_json(m.moe_expert_load[l]) : nlohmann::ordered_json());
    }
    j["moe_load_imbalance"] = imbalance;
    j["moe_expert_load"] = load;
  }
  if (m.moe_dropped_fraction) j["moe_dropped_fraction"] = *m.moe_dropped_fraction;
}
}  // namespace

namespace {
double seconds_between(StepTimer::Clock::time_point a, StepTimer::Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}
}  // namespace

StepTimer::StepTimer() : start_(Clock::now()), window_start_(start_), step_start_(start_) {}

void StepTimer::begin_step() {
  step_start_ = Clock::now();
  ++window_steps_;
}

double StepTimer::step_ms() const { return seconds_between(step_start_, Clock::now()) * 1e3; }

double StepTimer::elapsed_s() const { return seconds_between(start_, Clock::now()); }

double StepTimer::tokens_per_s(int64_t tokens_per_step) const {
  return static_cast<double>(window_steps_ * tokens_per_step) /
         seconds_between(window_start_, Clock::now());
}

void StepTimer::restart_window() {
  window_start_ = Clock::now();
  window_steps_ = 0;
  window_.restart();
}

MetricsReporter::MetricsReporter(const std::filesystem::path& metrics_path, int console_fd,
                                 int log_every_steps)
    : file_(metrics_path), fd_(console_fd), log_every_(log_every_steps) {
  tty_ = fd_ >= 0 && ::isatty(fd_) == 1;
}

MetricsReporter::~MetricsReporter() {
  if (open_line_) write_console("\n");
}

void MetricsReporter::write_console(const std::string& s) {
  if (fd_ < 0) return;
  size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = ::write(fd_, s.data() + done, s.size() - done);
    if (n <= 0) return;  // the console went away: training goes on
    done += static_cast<size_t>(n);
  }
}

std::string MetricsReporter::format(const StepMetrics& m) const {
  char buf[256];
  const double eta = m.step > 0 ? m.elapsed_s / static_cast<double>(m.step) *
                                      static_cast<double>(m.total_steps - m.step)
                                : 0.0;
  int n = std::snprintf(buf, sizeof buf,
                        "step %lld/%lld | loss %.4f | lr %.2e | grad %.3f | %.0f tok/s | "
                        "%.1f ms/step | ETA %s",
                        static_cast<long long>(m.step), static_cast<long long>(m.total_steps),
                        m.loss, m.lr, m.grad_norm, m.tokens_per_s, m.step_ms, hms(eta).c_str());
  std::string s(buf, static_cast<size_t>(n));
  if (m.val_loss) {
    n = std::snprintf(buf, sizeof buf, " | val %.4f", *m.val_loss);
    s.append(buf, static_cast<size_t>(n));
  }
  if (m.skipped) {
    n = std::snprintf(buf, sizeof buf, " | gradients overflowed at loss scale %g: step skipped",
                      m.loss_scale.value_or(0.0));
    s.append(buf, static_cast<size_t>(n));
  }
  return s;
}

bool MetricsReporter::should_log(int64_t step, bool last, bool skipped) const {
  return (log_every_ > 0 && step % log_every_ == 0) || step == 1 || last || skipped;
}

nlohmann::ordered_json metrics_json(const StepMetrics& m) {
  nlohmann::ordered_json j;
  j["step"] = m.step;
  j["loss"] = m.loss;
  j["lr"] = m.lr;
  j["grad_norm"] = m.grad_norm;
  j["tokens_per_s"] = m.tokens_per_s;
  j["step_ms"] = m.step_ms;
  if (m.val_loss) j["val_loss"] = *m.val_loss;
  for (const auto& [name, loss] : m.source_val_losses) j["val_loss/" + name] = loss;
  if (m.comm_ms) j["comm_ms"] = *m.comm_ms;
  if (m.exposed_comm_ms) j["exposed_comm_ms"] = *m.exposed_comm_ms;
  if (m.dp_wait_max_ms) j["dp_wait_max_ms"] = *m.dp_wait_max_ms;
  j["comm_bytes"] = m.comm_bytes;
  j["comm_bytes_window"] = m.comm_bytes_window;
  if (!m.pipeline_idle_ms.empty()) j["pipeline_idle_ms"] = m.pipeline_idle_ms;
  if (m.pipeline_bubble) j["pipeline_bubble"] = *m.pipeline_bubble;
  if (m.cp_ring_ms) j["cp_ring_ms"] = *m.cp_ring_ms;
  if (m.cp_ring_exposed_ms) j["cp_ring_exposed_ms"] = *m.cp_ring_exposed_ms;
  j["optimizer_state_mb"] = m.optimizer_state_mb;
  if (m.loss_scale) j["loss_scale"] = *m.loss_scale;
  if (m.skipped) j["skipped"] = true;
  j["mem_peak_mb"] = m.mem_peak_mb;
  if (m.mem_peak_mb_max) j["mem_peak_mb_max"] = *m.mem_peak_mb_max;
  if (!m.mem_peak_mb_ranks.empty()) j["mem_peak_mb_ranks"] = m.mem_peak_mb_ranks;
  if (m.mem_rss_peak_mb) j["mem_rss_peak_mb"] = *m.mem_rss_peak_mb;
  if (m.device_mem_peak_mb) j["device_mem_peak_mb"] = *m.device_mem_peak_mb;
  j["elapsed_s"] = m.elapsed_s;
  if (m.ps_version) j["ps_version"] = *m.ps_version;
  if (m.ps_gradients) j["ps_gradients"] = *m.ps_gradients;
  if (!m.ps_staleness.empty()) j["ps_staleness"] = m.ps_staleness;
  if (m.ps_staleness_max) j["ps_staleness_max"] = *m.ps_staleness_max;
  if (m.replicas) j["replicas"] = *m.replicas;
  add_moe_metrics(m, j);
  return j;
}

void MetricsReporter::log(const StepMetrics& m) {
  if (file_.is_open()) append(metrics_json(m));
  write_console((open_line_ ? "\r\033[K" : "") + format(m) + "\n");
  open_line_ = false;
}

void MetricsReporter::progress(const StepMetrics& m) {
  if (!tty_) return;  // in a log file, only the logged steps appear
  write_console("\r\033[K" + format(m));
  open_line_ = true;
}

void MetricsReporter::append(const nlohmann::ordered_json& line) {
  if (!file_.is_open()) return;
  file_.append(line.dump());
  for (const auto& sink : sinks_) sink(line);
}

void MetricsReporter::add_sink(std::function<void(const nlohmann::ordered_json&)> sink) {
  sinks_.push_back(std::move(sink));
}

void MetricsReporter::message(const std::string& line) {
  write_console((open_line_ ? "\n" : "") + line + "\n");
  open_line_ = false;
}

}  // namespace trainctl::train
