#include "parallel/periodic_sync.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>

namespace trainctl::parallel {

std::string_view to_string(DpSyncMode mode) {
  switch (mode) {
    case DpSyncMode::local_sgd:
      return "local_sgd";
    case DpSyncMode::diloco:
      return "diloco";
    case DpSyncMode::allreduce:
      break;
  }
  return "allreduce";
}

DpSyncMode parse_dp_sync_mode(std::string_view name) {
  if (name == "allreduce") return DpSyncMode::allreduce;
  if (name == "local_sgd") return DpSyncMode::local_sgd;
  if (name == "diloco") return DpSyncMode::diloco;
  throw std::invalid_argument("unknown parallel.dp_sync '" + std::string(name) +
                              "' (expected allreduce, local_sgd or diloco)");
}

PeriodicSync::PeriodicSync(comm::Communicator& dp, model::ParameterSet& params,
                           ops::Backend& backend, const PeriodicSyncOptions& options,
                           float* weights)
    : dp_(dp),
      params_(params),
      w_(weights != nullptr ? weights : params.data()),
      backend_(backend),
      options_(options) {
  if (options.mode == DpSyncMode::allreduce) {
    throw std::invalid_argument("PeriodicSync: dp_sync allreduce has no periodic synchronisation");
  }
  if (options.sync_every < 1) {
    throw std::invalid_argument("PeriodicSync: sync_every must be >= 1");
  }
  // The outer step and the averaging walk the flat buffers on the host.
  if (backend.device() != Device::cpu) {
    throw std::invalid_argument("parallel.dp_sync " + std::string(to_string(options.mode)) +
                                ": CPU backend only");
  }
  if (options.mode == DpSyncMode::diloco) {
    const auto n = static_cast<size_t>(params.total());
    global_.resize(n);
    momentum_.assign(n, 0.0f);
    delta_.resize(n);
    reset_outer();
  }
}

PeriodicSync::~PeriodicSync() = default;

bool PeriodicSync::due(int64_t step, bool last) const {
  return last || step % options_.sync_every == 0;
}

bool PeriodicSync::after_update(int64_t step, bool last) {
  stats_ = {};
  if (!due(step, last) || dp_.size() == 1) {
    // One replica: nothing to average, and DiLoCo's outer step is still taken so the
    // optimisation is the same function of the data at any dp.
    if (due(step, last) && options_.mode == DpSyncMode::diloco) outer_step();
    return false;
  }
  const auto t0 = std::chrono::steady_clock::now();
  if (options_.mode == DpSyncMode::local_sgd) {
    average_parameters();
  } else {
    outer_step();
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const size_t bytes = static_cast<size_t>(params_.total()) * sizeof(float);
  stats_.comm_s = s;
  stats_.exposed_s = s;
  stats_.collectives = 1;
  stats_.wire_bytes = bytes;
  stats_.sent_bytes = ring_allreduce_sent(bytes, dp_.size());
  return true;
}

void PeriodicSync::average_parameters() {
  const auto n = static_cast<size_t>(params_.total());
  dp_.allreduce(w_, n, comm::ReduceOp::sum);
  backend_.scale(w_, 1.0f / static_cast<float>(dp_.size()), n);
}

void PeriodicSync::outer_step() {
  const auto n = static_cast<size_t>(params_.total());
  float* theta = w_;
  // Δ_r = θ_global − θ_r, summed over the replicas, then averaged.
  for (size_t i = 0; i < n; ++i) delta_[i] = global_[i] - theta[i];
  if (dp_.size() > 1) dp_.allreduce(delta_.data(), n, comm::ReduceOp::sum);
  const float inv = 1.0f / static_cast<float>(dp_.size());
  const auto lr = static_cast<float>(options_.outer_lr);
  const auto mu = static_cast<float>(options_.outer_momentum);
  for (size_t i = 0; i < n; ++i) {
    const float d = delta_[i] * inv;
    momentum_[i] = mu * momentum_[i] + d;
    global_[i] -= lr * (d + mu * momentum_[i]);
    theta[i] = global_[i];
  }
}

std::vector<std::string> PeriodicSync::outer_state_names() const {
  if (options_.mode != DpSyncMode::diloco) return {};
  return {"outer_params", "outer_momentum"};
}

std::vector<FlatState> PeriodicSync::save_outer() const {
  if (options_.mode != DpSyncMode::diloco) return {};
  return {{"outer_params", global_}, {"outer_momentum", momentum_}};
}

void PeriodicSync::load_outer(const std::vector<FlatState>& states) {
  const std::vector<std::string> names = outer_state_names();
  if (states.size() != names.size()) {
    throw std::invalid_argument("dp_sync state holds other buffers than this mode's");
  }
  for (size_t k = 0; k < names.size(); ++k) {
    if (states[k].name != names[k] || states[k].values.size() != global_.size()) {
      throw std::invalid_argument("dp_sync state '" + states[k].name +
                                  "' does not match this mode or parameter layout");
    }
  }
  if (names.empty()) return;
  global_ = states[0].values;
  momentum_ = states[1].values;
}

void PeriodicSync::reset_outer() {
  if (options_.mode != DpSyncMode::diloco) return;
  std::copy(w_, w_ + params_.total(), global_.begin());
  std::fill(momentum_.begin(), momentum_.end(), 0.0f);
}

}  // namespace trainctl::parallel
